// Scoria's embedded web view: asks /api/state every 2 s (with the token from this page's own address) and draws
// it. Plain DOM and SVG, nothing loaded from elsewhere; text is always set as text, never as markup.
"use strict";

const PERIOD_MS = 2000;
const WINDOW_S = 600; // the plots show the last 10 minutes at most (the time there is samples for, at least 1)
const ORDER = ["online p99 latency (ms)", "offline throughput (iterations/s)", "offline CPU (millicores)",
  "evictions (total)", "node CPU in use (cores)"];
const COLOURS = ["#2b6cb0", "#c53030", "#1f9d55", "#c27c0e", "#6b46c1", "#00838f", "#b83280", "#4a5568",
  "#dd6b20", "#2c7a7b", "#805ad5", "#718096"];
const SVG = "http://www.w3.org/2000/svg";
const token = new URLSearchParams(location.search).get("token") || "";
let updates = 0;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (name === "class") node.className = value;
    else node.setAttribute(name, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

function tag(text) {
  return el("span", { class: "tag " + String(text).replace(/[^A-Za-z]/g, "") }, text);
}

function number(v) {
  if (v === null || v === undefined) return "–";
  const a = Math.abs(v);
  if (a >= 1e6) return (v / 1e6).toFixed(1) + "M";
  if (a >= 1e4) return (v / 1e3).toFixed(1) + "k";
  if (a >= 100) return v.toFixed(0);
  return (Math.round(v * 100) / 100).toString();
}

// -- plots -----------------------------------------------------------------------------------------------------
function chart(title, lines, now) {
  const W = 600, H = 170, L = 46, R = 8, T = 8, B = 20;
  const box = el("div", { class: "chart", "data-title": title });
  box.append(el("h3", {}, title));
  const plot = svg("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img",
    "aria-label": title });
  let first = now;
  for (const points of Object.values(lines)) if (points.length && points[0][0] < first) first = points[0][0];
  const span = Math.min(WINDOW_S, Math.max(60, now - first));
  const start = now - span;
  let top = 0;
  for (const points of Object.values(lines)) for (const [t, v] of points) if (t >= start && v > top) top = v;
  top = top > 0 ? top * 1.1 : 1;
  const x = (t) => L + (W - L - R) * (t - start) / span;
  const y = (v) => T + (H - T - B) * (1 - v / top);
  for (let i = 0; i <= 4; i++) {
    const v = top * i / 4;
    plot.append(svg("line", { class: "grid", x1: L, x2: W - R, y1: y(v), y2: y(v) }));
    plot.append(svg("text", { x: L - 4, y: y(v) + 3, "text-anchor": "end" }, number(v)));
  }
  const step = span <= 120 ? 20 : span <= 300 ? 60 : 120; // seconds between time labels
  for (let s = 0; s <= span; s += step) {
    const label = s === 0 ? "now" : s < 60 || s % 60 ? `-${s}s` : `-${s / 60}m`;
    plot.append(svg("text", { x: x(now - s), y: H - 6, "text-anchor": s >= span - 1 ? "start" : "middle" }, label));
  }
  plot.append(svg("line", { class: "axis", x1: L, x2: L, y1: T, y2: H - B }));
  plot.append(svg("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }));
  const legend = el("div", { class: "legend" });
  Object.keys(lines).sort().forEach((label, i) => {
    const points = lines[label].filter(([t]) => t >= start);
    const colour = COLOURS[i % COLOURS.length];
    const line = svg("polyline", { stroke: colour, "data-line": label, "data-points": points.length,
      points: points.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(" ") });
    plot.append(line);
    const last = points.length ? points[points.length - 1][1] : null;
    const swatch = el("span", { class: "swatch" });
    swatch.style.background = colour;
    legend.append(el("span", {}, swatch, label + " ", el("b", {}, number(last))));
  });
  box.append(plot, legend);
  return box;
}

function drawCharts(charts, now) {
  const titles = Object.keys(charts).sort((a, b) => {
    const ia = ORDER.indexOf(a), ib = ORDER.indexOf(b);
    return (ia < 0 ? 99 : ia) - (ib < 0 ? 99 : ib) || a.localeCompare(b);
  });
  const out = document.getElementById("charts");
  out.replaceChildren(...titles.map((t) => chart(t, charts[t], now)));
  if (!titles.length) out.append(el("p", { class: "empty" }, "no samples yet"));
}

// -- nodes, pods, queues, events -------------------------------------------------------------------------------
const TROUBLE = new Set(["Failed", "Error", "CrashLoopBackOff", "Evicted", "Unknown", "StartError", "OOMKilled"]);

function podRows(pods, showNode) {
  const table = el("table", { class: "pods" });
  for (const p of pods) {
    const trouble = TROUBLE.has(p.status) || p.restarts > 0 || p.status.startsWith("ExitCode");
    const row = el("tr", { class: "pod" + (trouble ? " trouble" : ""), "data-name": `${p.namespace}/${p.name}`,
      "data-status": p.status },
      el("td", {}, `${p.namespace}/${p.name}`), el("td", {}, tag(p.status)),
      el("td", {}, p.restarts ? `${p.restarts} restarts` : ""), el("td", {}, p.qos ? tag(p.qos) : ""),
      showNode ? el("td", {}, p.node || "") : null,
      el("td", { class: "reason" }, p.reason || ""));
    table.append(row);
  }
  return table;
}

function drawNodes(state) {
  const out = document.getElementById("nodes");
  out.replaceChildren(...state.nodes.map((n) => {
    const used = n.cpuUsedCores, cores = n.cpuCores || 1;
    const bar = el("div", { class: "bar", title: "CPU in use" }, el("span"));
    bar.firstChild.style.width = `${Math.min(100, 100 * (used || 0) / cores)}%`;
    const facts = [`CPU ${number(cores)} cores`, `memory ${n.allocatable.memory || "–"}`,
      `in use ${used === null || used === undefined ? "–" : number(used) + " cores"}`,
      `batch allocatable ${n.batchCpuMillis === null || n.batchCpuMillis === undefined ? "–" : n.batchCpuMillis + "m"}`,
      `offline quota ${n.offlineQuotaMillis === null || n.offlineQuotaMillis === undefined ? "unlimited" : n.offlineQuotaMillis + "m"}`];
    return el("div", { class: "node", "data-name": n.name },
      el("h3", {}, el("span", { class: "name" }, n.name), tag(n.status || "Unknown")),
      el("div", { class: "facts" }, facts.join(" · ") + (n.taints.length ? " · tainted " + n.taints.join(", ") : "")),
      bar, n.pods.length ? podRows(n.pods, false) : el("p", { class: "empty" }, "no pods"));
  }));
  if (!state.nodes.length) out.append(el("p", { class: "empty" }, "no node has reported yet: start an agent"));
  const unplaced = document.getElementById("unplaced");
  unplaced.replaceChildren();
  if (state.unplaced.length) {
    unplaced.append(el("div", { class: "node", "data-name": "" }, el("h3", {}, "not placed on a node",
      tag(`${state.unplaced.length}`)), podRows(state.unplaced, true)));
  }
}

function drawQueues(queues) {
  const body = document.querySelector("#queues tbody");
  const text = (m) => Object.entries(m).map(([k, v]) => `${k} ${v}`).join(", ") || "–";
  body.replaceChildren(...queues.map((q) => {
    const scale = Math.max(q.deservedCpu, q.allocatedCpu, 0.001);
    const bar = el("div", { class: "bar" }, el("span"), el("span", { class: "mark" }));
    bar.children[0].style.width = `${100 * q.allocatedCpu / scale}%`;
    bar.children[1].style.left = `${100 * q.deservedCpu / scale}%`;
    return el("tr", { "data-name": q.name },
      el("td", {}, q.name), el("td", {}, q.weight),
      el("td", {}, bar, el("small", {}, `${number(q.allocatedCpu)} of ${q.hasDeserved ? number(q.deservedCpu) : "–"} CPUs`)),
      el("td", { class: "deserved" }, q.hasDeserved ? text(q.deserved) : "– (no proportion or capacity plugin)"),
      el("td", { class: "allocated" }, text(q.allocated)));
  }));
}

function drawEvents(events) {
  const body = document.querySelector("#events tbody");
  body.replaceChildren(...events.map((e) => el("tr", {},
    el("td", {}, e.age + (e.count > 1 ? ` (x${e.count})` : "")), el("td", { class: e.type }, e.type),
    el("td", {}, e.reason), el("td", {}, e.object), el("td", {}, e.message))));
}

// -- the loop --------------------------------------------------------------------------------------------------
function say(text, kind) {
  const status = document.getElementById("status");
  status.textContent = text;
  status.className = "status " + kind;
}

async function update() {
  if (!token) {
    say("no token in this address: open the one serve wrote to STATE/web.url", "down");
    return;
  }
  try {
    const answer = await fetch("api/state", { headers: { Authorization: "Bearer " + token }, cache: "no-store" });
    const state = await answer.json();
    if (!answer.ok) throw new Error(state.error || answer.statusText);
    drawCharts(state.charts, state.time);
    drawNodes(state);
    drawQueues(state.queues);
    drawEvents(state.events);
    updates += 1;
    document.body.dataset.updates = String(updates);
    say(`live · ${new Date(state.time * 1000).toLocaleTimeString()}`, "live");
  } catch (err) {
    say(`not answering: ${err.message}`, "down");
  }
}

update();
setInterval(update, PERIOD_MS);
