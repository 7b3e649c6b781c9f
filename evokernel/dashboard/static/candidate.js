"use strict";
(() => {
  const { el, num, speedup, usd, badge, candidateLink } = evo;
  const cid = document.getElementById("page").dataset.candidate;

  const card = (label, value) => el("div", { class: "card" }, el("div", { class: "v" }, value), el("div", { class: "l", text: label }));

  // The candidate's timing as the verifier recorded it (details.timing.candidate), if any.
  function timing(t) {
    const c = t && t.candidate;
    if (!c) return "–";
    const spread = c.p10_ms == null ? "" : `, p10-p90 ${num(c.p10_ms, 4)}-${num(c.p90_ms, 4)} ms`;
    return `${c.reps} reps (${c.method || "?"})${spread}`;
  }

  // How the speedup's 95 % interval was sampled, and the re-timing against the incumbent that
  // confirmed it before promotion (details.timing.paired, details.confirmation; issue 35).
  function pairing(e, d) {
    const p = d.timing && d.timing.paired;
    if (e.speedup_low === null || e.speedup_low === undefined || !p) return "not paired";
    // The re-run that confirmed it (run/confirm.py): x times as fast as the incumbent in their
    // shared window, or, as a task's first best, a re-measurement with no incumbent.
    const c = d.confirmation || {};
    const first = c.first ? `; first figure ${speedup(c.first.speedup, c.first.low, c.first.high)}` : "";
    let confirmed = "";
    if (c.error) confirmed = `; confirmation: ${c.error}`;
    else if (e.confirmed && typeof c.vs_incumbent === "number")
      confirmed = `; confirmed: ${speedup(c.vs_incumbent, c.low, c.high)} as fast as #${c.incumbent} in one window (${c.pairs} pairs)${first}`;
    else if (e.confirmed) confirmed = `; confirmed by a re-run (the task's first best)${first}`;
    // The interval holds the spread between windows on top of the window's own (pairing.py).
    const spread = p.window_spread ? ` with ${num(100 * p.window_spread, 1)} % between windows` : "";
    return `${p.pairs} pairs, stopped at ${p.stopped}, ±${num(100 * p.halfwidth, 1)} %${spread}${confirmed}`;
  }

  function evaluation(e, i) {
    const d = e.details || {};
    const stages = d.stages || [];
    const checks = Array.isArray(d.checks) ? d.checks : [];
    return el("div", { class: "evaluation" },
      el("h3", {}, `evaluation ${i + 1} `, badge(e.status), " ", e.stage ? `at ${e.stage}` : "", " ", e.interpreter ? el("span", { class: "warn", text: "interpreter timings" }) : null),
      e.reason ? el("p", { class: "reason", text: e.reason }) : null,
      el("table", { class: "kv" }, el("tbody", {},
        [["speedup vs eager / compile", `${speedup(e.speedup_eager, e.speedup_low, e.speedup_high)} / ${speedup(e.speedup_compile)}`],
          ["paired timing (95 % interval)", pairing(e, d)],
          ["runtime median (IQR, CV)", `${num(e.runtime_ms, 4)} ms (${num(e.runtime_iqr_ms, 4)}, ${num(e.runtime_cv, 3)})`],
          ["eager / compile", `${num(e.eager_ms, 4)} / ${num(e.compile_ms, 4)} ms`],
          ["max abs error", e.max_abs_error === null ? "–" : Number(e.max_abs_error).toExponential(2)],
          ["profile", e.profile || d.profile || "strict"], ["device", e.device || "–"], ["duration", `${num(e.duration_s, 2)} s`],
          ["timing", timing(d.timing)],
        ].map(([k, v]) => el("tr", {}, el("th", { text: k }), el("td", { text: v }))))),
      stages.length ? el("table", { class: "grid stages" },
        el("thead", {}, el("tr", {}, ["stage", "status", "seconds", "reason"].map((h) => el("th", { text: h })))),
        el("tbody", {}, stages.map((s) => el("tr", {}, el("td", { text: s.stage }), el("td", {}, badge(s.status || "passed")),
          el("td", { text: num(s.seconds, 3) }), el("td", { class: "reason", text: s.reason || "" }))))) : null,
      checks.length ? el("details", {}, el("summary", { text: `${checks.length} correctness trials (variant x seed)` }),
        el("table", { class: "grid stages" },
          el("thead", {}, el("tr", {}, ["trial", "seed", "result", "max abs error", "seconds"].map((h) => el("th", { text: h })))),
          el("tbody", {}, checks.map((c) => el("tr", {}, el("td", { text: c.label || `variant ${c.variant}` }), el("td", { text: c.seed ?? "–" }),
            el("td", {}, badge(c.ok ? "passed" : "failed")), el("td", { text: c.max_abs_error == null ? "–" : Number(c.max_abs_error).toExponential(2) }),
            el("td", { text: num(c.seconds, 3) })))))) : null,
      e.feedback ? el("details", {}, el("summary", { text: "feedback given to the next prompt" }), el("pre", { text: e.feedback })) : null,
    );
  }

  function render(c) {
    const n = c.node;
    document.getElementById("crumbs").replaceChildren(
      el("a", { class: "crumb", href: `/runs/${c.run_id}` }, "run ", el("b", { text: c.run_id })),
      el("a", { class: "crumb", href: `/runs/${c.run_id}/tree?task=${encodeURIComponent(c.task)}` }, "tree ", el("b", { text: c.task })));
    document.getElementById("cand-title").replaceChildren(`candidate #${c.id} `, badge(n.status), " ", speedup(n.speedup, n.speedup_low, n.speedup_high));
    document.getElementById("cards").replaceChildren(
      card("task", c.task), card("operator", n.operator), card("model", n.model || "– (no LLM)"),
      card("island / generation", `${n.island} / ${n.generation}`),
      card("parents", n.parents.length ? el("span", {}, n.parents.map((p) => [candidateLink(p), " "])) : "none"));
    const idea = document.getElementById("idea");
    idea.hidden = !c.idea;
    idea.textContent = c.idea ? `idea: ${c.idea}` : "";
    document.getElementById("evaluations").replaceChildren(...(c.evaluations.length ? c.evaluations.map(evaluation) : [el("p", { class: "muted", text: "Not evaluated yet." })]));
    const code = document.getElementById("source");
    code.textContent = c.source;
    delete code.dataset.highlighted;
    hljs.highlightElement(code);
    document.getElementById("diffs").replaceChildren(...(c.diffs.length ? c.diffs.map((d) => {
      const box = el("div", { class: "diff" });
      box.innerHTML = d.diff
        ? Diff2Html.html(d.diff, { drawFileList: false, matching: "lines", outputFormat: "line-by-line" })
        : "<p class=\"muted\">identical source</p>";
      return el("div", {}, el("h3", {}, "parent ", candidateLink(d.parent)), box);
    }) : [el("p", { class: "muted", text: "No parents: a seed or a fresh proposal." })]));
    document.getElementById("llm").replaceChildren(...(c.llm_calls.length ? c.llm_calls.map((call) => el("div", { class: "llm" },
      el("p", {}, el("b", { text: call.model }), ` · ${call.outcome} · ${call.prompt_tokens} prompt + ${call.completion_tokens} completion tokens · ${usd(call.cost_usd)} · ${num(call.latency_s)} s`),
      call.error ? el("p", { class: "reason", text: call.error }) : null,
      el("details", {}, el("summary", { text: "prompt" }), el("pre", { text: call.prompt })),
      el("details", { open: "" }, el("summary", { text: "reply" }), el("pre", { text: call.reply })),
    )) : [el("p", { class: "muted", text: "No LLM call: written by a non-LLM operator (seed, tune)." })]));
  }

  evo.onUpdate(async () => {
    const data = await evo.getJSON(`/api/candidates/${cid}`);
    if (evo.changed("candidate", data)) render(data);
  });
  evo.start();
})();
