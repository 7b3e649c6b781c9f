"use strict";
// A sweep: its points (cells grouped over seeds, as the HTML report's table) and its cells, each a
// link to its run page.
(() => {
  const { el, fill, speedup, usd, time, badge } = evo;
  const sweepId = document.getElementById("page").dataset.sweep;
  const runLink = (id) => el("a", { href: `/runs/${encodeURIComponent(id)}`, class: "mono", text: id });
  const point = (p) => Object.entries(p).map(([k, v]) => `${k}=${v}`).join(" ") || "all cells";
  const stat = (s, fmt) => (s.mean === null ? "–" : s.n > 1 ? `${fmt(s.mean)} ± ${fmt(s.stdev)}` : fmt(s.mean));
  const share = (x) => `${(100 * x).toFixed(0)}%`;
  const card = (label, value) => el("div", { class: "card" }, el("div", { class: "v" }, value), el("div", { class: "l", text: label }));
  let chart = null;
  window.evoCharts = {};
  window.addEventListener("resize", () => chart && chart.resize());

  function render(data) {
    const s = data.sweep;
    document.getElementById("sweep-title").replaceChildren(`${s.name} `, el("span", { class: "mono muted", text: s.id }), " ", badge(s.status));
    const done = data.cells.reduce((n, c) => n + c.evaluations, 0);
    const budget = data.cells.reduce((n, c) => n + c.budget, 0);
    document.getElementById("cards").replaceChildren(
      card("cells", String(data.cells.length)),
      card("axes", s.axes.join(", ") || "–"),
      card("evaluations / budget", `${done} / ${budget || "–"}`),
      card("started", time(s.started)),
    );
    fill(document.querySelector("#points tbody"), data.groups.map((g) => [
      point(g.point), g.seeds.join(", "), el("span", {}, g.runs.map((id) => [runLink(id), " "])),
      stat(g.geomean, speedup), stat(g.correct_share, share), stat(g.evaluations, (x) => x.toFixed(0)), stat(g.usd, usd),
      data.tasks.map((t) => `${t} ${stat(g.best[t], speedup)}`).join(" · "),
    ]));
    fill(document.querySelector("#cells tbody"), data.cells.map((c) => [
      String(c.cell), runLink(c.id), point(c.point), badge(c.status), `${c.evaluations} / ${c.budget || "–"}`,
      speedup(c.best_speedup, c.best_low, c.best_high), usd(c.usd),
    ]));
    chart ||= echarts.init(document.getElementById("best-chart"), null, { renderer: "canvas" });
    window.evoCharts["best-chart"] = chart;
    chart.setOption({
      animation: false, legend: { type: "scroll", top: 0 }, grid: { left: 64, right: 16, top: 32, bottom: 40 },
      tooltip: { trigger: "item", formatter: (p) => `${p.seriesName}<br>${p.name}: ${speedup(p.value)}` },
      xAxis: { type: "category", data: data.tasks },
      // Speedups are ratios, and a CPU run's are ~1e-4: a log axis shows both kinds.
      yAxis: { type: "log", name: "best speedup vs eager (mean over seeds)" },
      series: data.groups.map((g) => ({
        name: point(g.point), type: "bar", data: data.tasks.map((t) => g.best[t].mean),
      })),
    }, { notMerge: true });
  }

  evo.onUpdate(async () => {
    const data = await evo.getJSON(`/api/sweeps/${encodeURIComponent(sweepId)}`);
    if (evo.changed("sweep", data)) render(data);
  });
  evo.start();
})();
