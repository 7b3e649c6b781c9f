"use strict";
(() => {
  const { fill } = evo;
  const runId = document.getElementById("page").dataset.run;
  evo.onUpdate(async () => {
    const data = await evo.getJSON(`/api/runs/${encodeURIComponent(runId)}/failures`);
    if (!evo.changed("failures", data)) return;
    fill(document.querySelector("#failures tbody"), evo.failureRows(data.failures));
  });
  evo.start();
})();
