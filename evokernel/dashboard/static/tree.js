"use strict";
(() => {
  const { el, speedup, COLORS, badge } = evo;
  const page = document.getElementById("page");
  const runId = page.dataset.run;
  const task = page.dataset.task;
  const info = document.getElementById("node-info");
  let cy = null;
  let shown = "";

  document.getElementById("legend").replaceChildren(...Object.entries(COLORS).map(([status, color]) =>
    el("span", { class: "key" }, el("span", { class: "dot", style: `background:${color}` }), status)));

  // Size only encodes speedup relative to the task's best shown (styling); positions come from
  // Cytoscape's breadthfirst layout.
  function elements(data) {
    const top = Math.max(0, ...data.nodes.filter((n) => n.status === "correct").map((n) => n.speedup || 0));
    const size = (n) => (n.status === "correct" && n.speedup && top > 0 ? 10 + 20 * Math.sqrt(n.speedup / top) : 10);
    const nodes = data.nodes.map((n) => ({ group: "nodes", data: { id: String(n.id), color: COLORS[n.status] || "#888", size: size(n), node: n } }));
    const edges = data.nodes.flatMap((n) => n.parents.map((p, rank) => ({
      group: "edges", data: { id: `${p}-${n.id}`, source: String(p), target: String(n.id), rank },
    })));
    return [...nodes, ...edges];
  }

  function describe(n) {
    info.replaceChildren(
      el("h3", {}, el("a", { href: `/candidates/${n.id}`, text: `candidate #${n.id}` })),
      el("p", {}, badge(n.status), " ", speedup(n.speedup, n.speedup_low, n.speedup_high)),
      el("p", { text: `${n.operator} · island ${n.island} · generation ${n.generation}` }),
      el("p", { text: n.parents.length ? `parents ${n.parents.map((p) => `#${p}`).join(", ")}` : "no parents shown" }),
      n.reason ? el("p", { class: "reason", text: n.reason }) : null,
    );
  }

  function layout(fit) {
    return cy.layout({ name: "breadthfirst", directed: true, spacingFactor: 1.1, fit, padding: 20, animate: false,
      roots: cy.nodes().filter((n) => n.indegree(false) === 0) });
  }

  function draw(data) {
    document.getElementById("tree-count").textContent = data.truncated
      ? `${data.nodes.length} of ${data.total} candidates: the fastest ones' lineage and the newest (${data.hidden_parents} links to hidden parents)`
      : `${data.total} candidates`;
    const ids = data.nodes.map((n) => n.id).join(",");
    if (cy === null) {
      cy = cytoscape({
        container: document.getElementById("tree"),
        elements: elements(data),
        minZoom: 0.02, maxZoom: 4, textureOnViewport: true, hideEdgesOnViewport: data.nodes.length > 2000,
        style: [
          { selector: "node", style: { "background-color": "data(color)", width: "data(size)", height: "data(size)", "border-width": 1, "border-color": "#fff" } },
          { selector: "node:selected", style: { "border-width": 3, "border-color": "#0969da" } },
          { selector: "edge", style: { width: 1, "line-color": "#c8d1da", "target-arrow-shape": "triangle", "target-arrow-color": "#c8d1da", "curve-style": "bezier", "arrow-scale": 0.6 } },
          { selector: "edge[rank > 0]", style: { "line-style": "dashed" } },
        ],
      });
      cy.on("mouseover", "node", (e) => describe(e.target.data("node")));
      cy.on("tap", "node", (e) => { window.location.href = `/candidates/${e.target.id()}`; });
      layout(true).run();
      window.evoTree = cy; // for tests and the console
    } else if (ids !== shown) {
      const viewport = { zoom: cy.zoom(), pan: cy.pan() };
      cy.elements().remove();
      cy.add(elements(data));
      layout(false).run();
      cy.viewport(viewport);
    }
    shown = ids;
  }

  evo.onUpdate(async () => {
    const data = await evo.getJSON(`/api/runs/${encodeURIComponent(runId)}/tree?task=${encodeURIComponent(task)}`);
    if (evo.changed("tree", data)) draw(data);
  });
  evo.start();
})();
