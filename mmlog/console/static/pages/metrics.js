// The Metrics page: the broker's produce and fetch rates, bytes in and out, and request latency
// percentiles per API over the last hour, from its own counters sampled every few seconds.

const REFRESH_MS = 10000;
const COLOURS = ["#2c5fd8", "#b54708"];  // ui.chart's first two series colours

export async function render(root, params, ui) {
  const body = ui.el("div");
  root.append(ui.el("h1", {}, "Metrics"), body);
  async function refresh() {
    const { samples, interval_s: interval } = await ui.api("/metrics/history");
    const at = (s) => s.time * 1000;
    const api = (name, field) => ({ name: `${name} ${field}`,
      points: samples.map((s) => [at(s), (s.apis[name] || {})[field] || 0]) });
    const latest = samples.length ? samples[samples.length - 1] : null;
    body.replaceChildren(
      ui.el("p", { class: "muted" }, interval ? `A sample every ${interval} s, the last hour.` : "Not sampled."),
      ...figure(ui, "Requests per second", [api("Produce", "rate"), api("Fetch", "rate")], "/s"),
      ...figure(ui, "Bytes in and out per second", [
        { name: "bytes in", points: samples.map((s) => [at(s), s.bytes_in]) },
        { name: "bytes out", points: samples.map((s) => [at(s), s.bytes_out]) }], " B/s"),
      ...figure(ui, "Latency, 99th percentile", [api("Produce", "p99"), api("Fetch", "p99")], " ms"),
      ui.el("h2", {}, "Request latency per API (last sample)"), latencyTable(latest, ui));
  }
  await refresh();
  const timer = setInterval(async () => {
    if (!root.isConnected) { clearInterval(timer); return; }
    try { await refresh(); } catch (error) { clearInterval(timer); }
  }, REFRESH_MS);
}

function figure(ui, title, series, unit) {
  const legend = ui.el("div", { class: "muted" }, series.map((s, i) => {
    const swatch = ui.el("span", {}, "■ ");
    swatch.style.color = COLOURS[i % COLOURS.length];  // through the DOM: the CSP allows no inline style
    return ui.el("span", {}, swatch, s.name, "   ");
  }));
  return [ui.el("h2", {}, title), ui.chart(series, { unit }), legend];
}

function latencyTable(sample, ui) {
  const apis = sample ? Object.entries(sample.apis).sort((a, b) => b[1].rate - a[1].rate) : [];
  if (!apis.length) return ui.el("p", { class: "muted" }, "No requests in the last interval.");
  return ui.el("table", { id: "latency" },
    ui.el("tr", {}, ["API", "Requests/s", "p50 ms", "p99 ms", "p99.9 ms"].map((t, i) =>
      ui.el("th", { class: i ? "num" : null }, t))),
    apis.map(([name, a]) => ui.el("tr", {}, ui.el("td", {}, name), ui.el("td", { class: "num" }, a.rate.toFixed(1)),
      ui.el("td", { class: "num" }, a.p50), ui.el("td", { class: "num" }, a.p99),
      ui.el("td", { class: "num" }, a["p99.9"]))));
}
