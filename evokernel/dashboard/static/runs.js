"use strict";
(() => {
  const { el, fill, speedup, usd, time, badge } = evo;
  const runLink = (id) => el("a", { href: `/runs/${id}`, class: "mono", text: id });
  const sweepLink = (id, text) => el("a", { href: `/sweeps/${encodeURIComponent(id)}`, class: "mono", text: text || id });

  function progress(done, budget) {
    const share = budget ? Math.min(done / budget, 1) : 0;
    return el("span", { class: "progress" },
      el("span", { class: "bar" }, el("span", { class: "fill", style: `width:${(share * 100).toFixed(1)}%` })),
      `${done} / ${budget || "–"}`);
  }

  evo.onUpdate(async () => {
    const data = await evo.getJSON("/api/runs");
    if (!evo.changed("runs", data)) return;
    fill(document.querySelector("#runs tbody"), data.runs.map((r) => [
      runLink(r.id), r.name, r.sweep_id ? sweepLink(r.sweep_id, `${r.sweep_id} #${r.cell}`) : "–", badge(r.status), time(r.started),
      time(r.finished), r.tasks, progress(r.evaluations, r.budget), speedup(r.best_speedup, r.best_low, r.best_high), usd(r.usd),
    ]));
    document.getElementById("no-runs").hidden = data.runs.length > 0;
    document.getElementById("sweeps-section").hidden = data.sweeps.length === 0;
    // A sweep's totals over its cells (the runs above): budget used, best speedup, cost.
    const byId = Object.fromEntries(data.runs.map((r) => [r.id, r]));
    fill(document.querySelector("#sweeps tbody"), data.sweeps.map((s) => {
      const cells = s.cells.map((id) => byId[id]).filter(Boolean);
      const sum = (key) => cells.reduce((total, r) => total + (r[key] || 0), 0);
      const bests = cells.map((r) => r.best_speedup).filter((b) => b !== null);
      return [
        sweepLink(s.id), s.name, badge(s.status), s.axes.join(", ") || "–", time(s.started),
        progress(sum("evaluations"), sum("budget")), speedup(bests.length ? Math.max(...bests) : null), usd(sum("usd")),
        el("span", {}, s.cells.map((id) => [runLink(id), " "])),
      ];
    }));
  });
  evo.start();
})();
