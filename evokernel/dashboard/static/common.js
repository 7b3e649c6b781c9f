"use strict";
// Shared by every page: JSON fetches, a small DOM builder (text is always set as text, never
// parsed as HTML), number formats, verdict colours, and live updates over server-sent events.
const evo = (() => {
  const updaters = [];
  let version = null;
  let busy = false;
  let again = false;
  // At most one refresh per second however fast a running experiment writes.
  const MIN_GAP_MS = 1000;

  async function getJSON(url) {
    const response = await fetch(url, { cache: "no-store" });
    const body = await response.json();
    if (!response.ok) throw new Error(body.error || response.statusText);
    return body;
  }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value);
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function fill(tbody, rows, empty = "none yet") {
    const width = tbody.closest("table").querySelectorAll("thead th").length || 1;
    tbody.replaceChildren(...(rows.length
      ? rows.map((cells) => el("tr", {}, cells.map((c) => el("td", {}, c))))
      : [el("tr", {}, el("td", { class: "muted", colspan: String(width), text: empty }))]));
  }

  const num = (x, digits = 2) => (x === null || x === undefined ? "–" : Number(x).toFixed(digits));
  // Two decimals, or three significant digits below 0.01 (CPU-interpreter speedups are ~1e-4).
  // With low and high (its 95 % interval from paired timing) "2.05× [1.98-2.11]", the form of the
  // reports (evokernel.types.format_speedup); the bare figure when it has none (never invented).
  const speedup = (x, low = null, high = null) => {
    if (x === null || x === undefined) return "–";
    const fig = (y) => { const v = Number(y); return v !== 0 && Math.abs(v) < 0.01 ? v.toPrecision(3) : v.toFixed(2); };
    const paired = low !== null && low !== undefined && high !== null && high !== undefined;
    return paired ? `${fig(x)}× [${fig(low)}-${fig(high)}]` : `${fig(x)}×`;
  };
  const usd = (x) => (x === null || x === undefined ? "–" : `$${Number(x).toFixed(x < 1 ? 4 : 2)}`);
  const time = (iso) => (iso ? iso.replace("T", " ") : "–");

  const COLORS = {
    correct: "#1a7f37",
    incorrect: "#d4a72c",
    compile_error: "#cf222e",
    runtime_error: "#8250df",
    timeout: "#bc4c00",
    crashed: "#24292f",
    rejected: "#bf3989",
    pending: "#afb8c1",
  };
  const badge = (status) => el("span", { class: `badge s-${status}`, text: status });
  const candidateLink = (id) => el("a", { href: `/candidates/${id}`, class: "mono", text: `#${id}` });

  function showError(error) {
    const box = document.getElementById("error");
    box.textContent = String(error.message || error);
    box.hidden = false;
  }

  function refresh() {
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    Promise.all(updaters.map((fn) => fn()))
      .then(() => {
        document.getElementById("error").hidden = true;
      })
      .catch(showError)
      .finally(() => {
        busy = false;
        if (again) {
          again = false;
          setTimeout(refresh, MIN_GAP_MS);
        }
      });
  }

  function live() {
    const badgeEl = document.getElementById("live");
    const source = new EventSource("/api/events");
    source.addEventListener("version", (event) => {
      badgeEl.textContent = "live";
      badgeEl.className = "live on";
      // The first event (on connect) also refetches once: a recomputed answer whose `refreshed`
      // was broadcast before this stream connected would otherwise stay unseen until the next change.
      if (version === null || event.data !== version) setTimeout(refresh, 0);
      version = event.data;
    });
    // A recomputed answer is ready (the server answered the last fetch with the previous one).
    source.addEventListener("refreshed", () => setTimeout(refresh, 0));
    source.addEventListener("error", () => {
      badgeEl.textContent = "reconnecting";
      badgeEl.className = "live off";
    });
    window.addEventListener("pagehide", () => source.close());
  }

  // A page registers its updaters, then calls start(): one load now, one per library change.
  function onUpdate(fn) {
    updaters.push(fn);
  }
  function start() {
    refresh();
    live();
  }

  // Render only when the payload changed, so an update elsewhere keeps open sections as they are.
  function changed(key, payload) {
    const text = JSON.stringify(payload);
    if (changed.last[key] === text) return false;
    changed.last[key] = text;
    return true;
  }
  changed.last = {};

  // The "why it failed" rows (run page and failures page); mutation failures name proposals.
  function failureRows(failures) {
    return failures.map((f) => [
      f.task, f.stage || "–", badge(f.status), el("span", { class: "reason", text: f.reason || "–" }), f.count,
      el("span", {}, f.examples.map((id) => [f.stage === "mutation" ? `proposal ${id}` : candidateLink(id), " "])),
    ]);
  }

  return { failureRows, getJSON, el, fill, num, speedup, usd, time, COLORS, badge, candidateLink, onUpdate, start, changed };
})();
