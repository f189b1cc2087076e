// The console's helpers for page modules: api() (JSON, with the CSRF token on changes), el() (elements
// whose text is always set as text, never parsed as HTML), table() with server-side paging, chart() (an
// inline SVG line chart), link(), toast(), formatBytes(). Page modules get them as their `ui` argument.

let csrf = null;

export function setCsrf(token) { csrf = token; }

export class ApiError extends Error {
  constructor(status, name, message) { super(message); this.status = status; this.name = name; }
}

// fetch a console API path ("/topics?page=2"); JSON in and out; a non-2xx answer throws ApiError.
export async function api(path, { method = "GET", body } = {}) {
  const headers = { "Accept": "application/json" };
  if (method !== "GET") {
    headers["Content-Type"] = "application/json";
    if (csrf) headers["X-Csrf-Token"] = csrf;
  }
  const response = await fetch("/console/api" + path, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: "same-origin",
  });
  let data = null;
  try { data = await response.json(); } catch (e) { data = null; }
  if (!response.ok) {
    const name = (data && (data.error || data.error_code)) || String(response.status);
    throw new ApiError(response.status, String(name), (data && data.message) || response.statusText);
  }
  return data;
}

// el("td", {class: "num", title: "x"}, "text", childElement, ...): strings become text nodes.
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") node.addEventListener(key.slice(2), value);
    else if (key === "class") node.className = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function link(text, hash) { return el("a", { href: hash }, text); }

export function hashFor(area, ...parts) {
  return "#/" + [area, ...parts.map((p) => encodeURIComponent(String(p)))].join("/");
}

export function toast(message, kind = "error") {
  const box = document.getElementById("toast");
  box.textContent = message;
  box.className = kind;
  box.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { box.hidden = true; }, 6000);
}

export function showError(root, error) {
  root.append(el("p", { class: "error" }, `${error.name || "Error"}: ${error.message}`));
}

export function formatBytes(n) {
  if (n === null || n === undefined) return "";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
}

export function formatTime(ms) { return ms ? new Date(ms).toISOString().replace("T", " ").slice(0, 19) : ""; }

// A table whose rows come a page at a time from `path` (which answers {items, total, page, size});
// columns: [{title, value: item => text or Node, num: bool}]. With `search`, a box filters by `q`.
export function table(path, columns, { search = false, size = 50, empty = "Nothing here." } = {}) {
  const box = el("div", { class: "paged" });
  const state = { page: 1, q: "" };
  const input = search ? el("input", { type: "search", placeholder: "Search", "aria-label": "Search" }) : null;
  const body = el("tbody");
  const info = el("span", { class: "muted" });
  const prev = el("button", { type: "button", class: "plain", onclick: () => { state.page--; load(); } }, "‹ Prev");
  const next = el("button", { type: "button", class: "plain", onclick: () => { state.page++; load(); } }, "Next ›");
  const head = el("tr", {}, columns.map((c) => el("th", { class: c.num ? "num" : null }, c.title)));
  if (input) {
    let timer = null;
    input.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(() => { state.q = input.value; state.page = 1; load(); }, 250);
    });
    box.append(el("div", { class: "toolbar" }, input));
  }
  box.append(el("table", {}, el("thead", {}, head), body), el("div", { class: "pager" }, prev, info, next));

  async function load() {
    const sep = path.includes("?") ? "&" : "?";
    const query = `page=${state.page}&size=${size}&q=${encodeURIComponent(state.q)}`;
    try {
      const data = await api(path + sep + query);
      body.replaceChildren(...data.items.map((item) => el("tr", {}, columns.map((c) =>
        el("td", { class: c.num ? "num" : null }, c.value(item))))));
      if (!data.items.length) body.append(el("tr", {}, el("td", { colspan: columns.length, class: "muted" }, empty)));
      const pages = Math.max(1, Math.ceil(data.total / data.size));
      info.textContent = `page ${data.page} of ${pages} (${data.total})`;
      prev.disabled = data.page <= 1;
      next.disabled = data.page >= pages;
    } catch (error) {
      body.replaceChildren(el("tr", {}, el("td", { colspan: columns.length, class: "error" },
        `${error.name}: ${error.message}`)));
    }
  }
  box.reload = load;
  load();
  return box;
}

const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = String(text);
  return node;
}

// An SVG line chart of series [{name, points: [[timeMs, value], ...]}] (one colour per series).
export function chart(series, { width = 640, height = 180, unit = "" } = {}) {
  const pad = { left: 50, right: 10, top: 10, bottom: 20 };
  const root = svg("svg", { class: "chart", width, height, viewBox: `0 0 ${width} ${height}`, role: "img" });
  const all = series.flatMap((s) => s.points);
  if (!all.length) {
    root.append(svg("text", { x: width / 2, y: height / 2, "text-anchor": "middle" }, "no samples yet"));
    return root;
  }
  const t0 = Math.min(...all.map((p) => p[0])), t1 = Math.max(...all.map((p) => p[0]));
  const top = Math.max(1e-9, ...all.map((p) => p[1]));
  const x = (t) => pad.left + (t1 === t0 ? 0 : (t - t0) / (t1 - t0)) * (width - pad.left - pad.right);
  const y = (v) => height - pad.bottom - (v / top) * (height - pad.top - pad.bottom);
  root.append(svg("line", { class: "axis", x1: pad.left, y1: y(0), x2: width - pad.right, y2: y(0) }));
  root.append(svg("text", { x: 4, y: pad.top + 8 }, `${+top.toPrecision(3)}${unit}`));
  root.append(svg("text", { x: 4, y: y(0) }, `0${unit}`));
  root.append(svg("text", { x: pad.left, y: height - 4 }, new Date(t0).toLocaleTimeString()));
  root.append(svg("text", { x: width - pad.right, y: height - 4, "text-anchor": "end" },
    new Date(t1).toLocaleTimeString()));
  const colours = ["#2c5fd8", "#b54708", "#067647", "#b42318", "#6941c6"];
  series.forEach((s, i) => {
    const d = s.points.map((p, j) => `${j ? "L" : "M"}${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(" ");
    const path = svg("path", { class: "line", d, stroke: colours[i % colours.length] });
    path.append(svg("title", {}, s.name));
    root.append(path);
  });
  return root;
}
