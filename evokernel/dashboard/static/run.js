"use strict";
(() => {
  const { el, fill, num, speedup, usd, time, badge, candidateLink } = evo;
  const runId = document.getElementById("page").dataset.run;
  const base = `/api/runs/${encodeURIComponent(runId)}`;
  const charts = {};
  const chart = (id) => (charts[id] ||= echarts.init(document.getElementById(id), null, { renderer: "canvas" }));
  window.addEventListener("resize", () => Object.values(charts).forEach((c) => c.resize()));
  window.evoCharts = charts; // for tests and the console
  const xSelect = document.getElementById("best-x");
  const taskSelect = document.getElementById("island-task");
  const X_NAMES = { evaluations: "evaluations", wall_s: "active seconds", usd: "LLM USD" };

  const card = (label, value, title) => el("div", { class: "card", title }, el("div", { class: "v" }, value), el("div", { class: "l", text: label }));

  function renderOverview(data) {
    const o = data.overview;
    const r = o.run;
    document.getElementById("run-title").replaceChildren(`${r.name} `, el("span", { class: "mono muted", text: r.id }), " ", badge(r.status));
    document.getElementById("cards").replaceChildren(
      card("evaluations / budget", `${r.evaluations} / ${r.budget || "–"}`),
      card("tasks with a correct kernel", `${o.correct_tasks} / ${o.tasks.length}`),
      card("geomean best speedup", speedup(o.geomean)),
      card("LLM cost", usd(r.usd)),
      card("started", time(r.started)),
      card("finished", time(r.finished)),
      o.interpreter ? card("timings", "interpreter", "Triton ran under TRITON_INTERPRET=1 on a CPU: timings say nothing about GPU speed") : null,
    );
    fill(document.querySelector("#tasks tbody"), o.tasks.map((t) => [
      t.task,
      t.best_candidate === null ? "–" : el("span", {}, speedup(t.speedup_eager, t.speedup_low, t.speedup_high), " ", candidateLink(t.best_candidate)),
      speedup(t.speedup_compile), num(t.runtime_ms, 4),
      t.sol_share === null || t.sol_share === undefined ? "–" : `${(100 * t.sol_share).toFixed(0)}%`, t.bottleneck || "–",
      `${t.evaluations} / ${t.budget || "–"}`, t.correct,
      t.profile, t.device || "–",
      el("a", { href: `/runs/${encodeURIComponent(runId)}/tree?task=${encodeURIComponent(t.task)}`, text: "evolution tree" }),
    ]));
    const tasks = o.tasks.map((t) => t.task);
    if ([...taskSelect.options].map((x) => x.value).join() !== tasks.join()) {
      const keep = taskSelect.value;
      taskSelect.replaceChildren(...tasks.map((t) => el("option", { value: t, text: t })));
      if (tasks.includes(keep)) taskSelect.value = keep;
    }
    renderFastP(o);
    renderPool(data.pool);
    fill(document.querySelector("#usage tbody"), data.usage.map((u) => [
      u.task || "–", u.model, u.calls, u.failed, `${u.prompt_tokens} / ${u.completion_tokens}`, usd(u.cost_usd), `${num(u.mean_latency_s)} s`,
    ]));
  }

  // fast_p over the range the kernels reached, on a log axis (as the report's PNG): on a fixed 0-2
  // axis a CPU run's 1e-4x speedups were a flat line at 0.
  function renderFastP(o) {
    const bests = o.tasks.filter((t) => t.best_candidate !== null).map((t) => t.speedup_eager || 0);
    const seen = bests.filter((s) => s > 0);
    const base = { animation: false, grid: { left: 48, right: 16, top: 16, bottom: 40 }, tooltip: { trigger: "axis" },
      yAxis: { type: "value", min: 0, max: 1, name: "fast_p" } };
    if (!seen.length) {
      chart("fastp-chart").setOption({ ...base, xAxis: { type: "value", name: "p" }, series: [],
        graphic: { type: "text", left: "center", top: "middle", style: { text: "no task has a correct kernel with a speedup yet", fill: "#888" } },
      }, { notMerge: true });
      return;
    }
    const lo = Math.min(...seen) / 2, hi = Math.max(...seen) * 2, steps = 120;
    const ps = [...Array(steps).keys()].map((i) => lo * (hi / lo) ** (i / (steps - 1)));
    const grid = [...new Set([...ps, ...seen])].sort((a, b) => a - b);
    const data = grid.map((p) => [p, bests.filter((s) => s > p).length / o.tasks.length]);
    chart("fastp-chart").setOption({ ...base,
      xAxis: { type: "log", min: lo, max: hi, name: "p (log)", nameLocation: "middle", nameGap: 24 },
      series: [{ type: "line", step: "end", symbol: "none", areaStyle: { opacity: 0.15 }, data }],
    }, { notMerge: true });
  }

  function renderPool(p) {
    document.getElementById("pool-window").textContent = p.evaluations
      ? `from the run's ${p.evaluations} newest evaluations, ${time(p.window_start)} to ${time(p.window_end)}` : "no evaluations yet";
    const share = (x) => (x === null ? "–" : `${(x * 100).toFixed(1)} %`);
    const devices = Object.keys(p.devices);
    const cpuOnly = devices.length > 0 && devices.every((d) => d.startsWith("cpu"));
    const stages = Object.entries(p.stage_mean_s).map(([k, v]) => `${k} ${v === null ? "–" : `${num(v, 3)} s`}`).join(" · ");
    const rows = [
      ["throughput", p.per_min === null ? "–" : `${num(p.per_min, 1)} evaluations / min`],
      ["mean evaluation", p.mean_duration_s === null ? "–" : `${num(p.mean_duration_s, 3)} s`],
      ["mean per stage", stages],
      // The lock serialises timings on every device; on a CPU run there is no GPU to name.
      p.gpu_lock_held_share === null && p.gpu_lock_wait_share === null ? null
        : [cpuOnly ? "timing lock held / waited (CPU)" : "GPU lock held / waited",
          `${share(p.gpu_lock_held_share)} / ${share(p.gpu_lock_wait_share)}`],
      ["devices", Object.entries(p.devices).map(([d, n]) => `${d} (${n})`).join(", ") || "–"],
      ["waiting", `${p.pending_candidates} candidates to evaluate, ${p.open_proposals} proposals being written`],
    ];
    document.querySelector("#pool tbody").replaceChildren(...rows.filter(Boolean).map(([k, v]) => el("tr", {}, el("th", { text: k }), el("td", { text: v }))));
  }

  function renderBest(data) {
    const series = Object.entries(data.tasks).map(([task, t]) => ({
      name: task, type: "line", step: "end", showSymbol: false,
      data: t.points.filter((p) => p[1] !== null).map((p) => ({ value: [p[0], p[1]], candidate: p[2] })),
    }));
    const c = chart("best-chart");
    c.setOption({
      animation: false, legend: { type: "scroll", top: 0 }, grid: { left: 48, right: 16, top: 32, bottom: 40 },
      tooltip: { trigger: "item", formatter: (p) => `${p.seriesName}<br>${X_NAMES[data.x]} ${num(p.value[0], data.x === "evaluations" ? 0 : 2)}: ${speedup(p.value[1])}<br>candidate #${p.data.candidate}` },
      xAxis: { type: "value", name: X_NAMES[data.x], nameLocation: "middle", nameGap: 24 },
      yAxis: { type: "value", name: "speedup vs eager" },
      series,
    }, { notMerge: true });
    c.off("click");
    c.on("click", (p) => { if (p.data && p.data.candidate) window.location.href = `/candidates/${p.data.candidate}`; });
  }

  function renderIslands(data) {
    chart("island-chart").setOption({
      animation: false, legend: { type: "scroll", top: 0 }, grid: { left: 48, right: 16, top: 32, bottom: 40 }, tooltip: { trigger: "axis" },
      xAxis: { type: "value", name: "generation", nameLocation: "middle", nameGap: 24 },
      yAxis: { type: "value", name: "best speedup" },
      series: [
        ...data.islands.map((i) => ({ name: `island ${i.island}`, type: "line", step: "end", data: i.curve })),
        { name: "migrations", type: "scatter", symbol: "triangle", symbolSize: 9,
          data: data.events.filter((e) => e.kind === "migrate").map((e) => [e.generation, 0]) },
      ],
    }, { notMerge: true });
    fill(document.querySelector("#islands tbody"), data.islands.map((i) => [
      i.island, i.candidates, i.correct, speedup(i.best), i.migrants_in, i.migrants_out, i.resets,
    ]));
  }

  function renderFailures(data) {
    const top = data.failures.slice(0, 12);
    fill(document.querySelector("#failures tbody"), evo.failureRows(top));
  }

  // Each part renders as soon as its answer arrives: on a large run the first computation of
  // each takes seconds (docs/benchmarks.md), and the overview should not wait for the curves.
  async function update() {
    const parts = [
      evo.getJSON(base).then((run) => evo.changed("run", run) && renderOverview(run)).then(islands),
      evo.getJSON(`${base}/best?x=${xSelect.value}`).then((best) => evo.changed("best", best) && renderBest(best)),
      evo.getJSON(`${base}/failures`).then((f) => evo.changed("failures", f) && renderFailures(f)),
    ];
    await Promise.all(parts);
  }

  let islandData = null;
  async function islands() {
    islandData = await evo.getJSON(`${base}/islands`);
    showIslands();
  }
  function showIslands() {
    const task = islandData && islandData.tasks[taskSelect.value];
    const data = task || { islands: [], events: [] };
    if (evo.changed("islands", [taskSelect.value, data])) renderIslands(data);
  }
  xSelect.addEventListener("change", () => evo.getJSON(`${base}/best?x=${xSelect.value}`).then(renderBest));
  taskSelect.addEventListener("change", showIslands);
  evo.onUpdate(update);
  evo.start();
})();
