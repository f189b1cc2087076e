// The Messages page: #/messages/<topic>?partition=0&from=end&order=newest... browses a partition's records
// (key, value and headers as text, JSON, hex or decoded by the schema registry), and produces one.
const FORMATS = ["text", "json", "hex", "registry"];

function select(ui, name, options, value) {
  return ui.el("select", { name, "aria-label": name }, options.map(([v, label]) =>
    ui.el("option", { value: v, selected: v === value }, label)));
}

export async function render(root, { parts, query }, ui) {
  const topic = parts[0] || "";
  const q = { partition: "0", from: "end", order: "newest", value_format: "text", key_format: "text",
              offset: "", timestamp: "", filter: "", ...query };
  root.append(ui.el("h1", {}, "Messages"));
  const fields = {
    topic: ui.el("input", { name: "topic", value: topic, placeholder: "topic", required: true }),
    partition: ui.el("input", { name: "partition", type: "number", min: 0, value: q.partition }),
    from: select(ui, "from", [["end", "the end"], ["start", "the start"], ["offset", "an offset"],
      ["timestamp", "a time"]], q.from),
    offset: ui.el("input", { name: "offset", type: "number", min: 0, value: q.offset, placeholder: "offset" }),
    timestamp: ui.el("input", { name: "timestamp", type: "datetime-local", value: q.timestamp }),
    order: select(ui, "order", [["newest", "newest first"], ["oldest", "oldest first"]], q.order),
    key_format: select(ui, "key_format", FORMATS.map((f) => [f, f]), q.key_format),
    value_format: select(ui, "value_format", FORMATS.map((f) => [f, f]), q.value_format),
    filter: ui.el("input", { name: "filter", type: "search", value: q.filter, placeholder: "key or value contains" }),
  };
  const label = (text, input) => ui.el("label", {}, text, input);
  const load = ui.el("button", { type: "submit", id: "load" }, "Show");
  const form = ui.el("form", { class: "toolbar", id: "browse" }, label("Topic", fields.topic),
    label("Partition", fields.partition), label("From", fields.from), label("Offset", fields.offset),
    label("Time", fields.timestamp), label("Order", fields.order), label("Key as", fields.key_format),
    label("Value as", fields.value_format), label("Filter", fields.filter), load);
  const status = ui.el("p", { class: "muted", id: "browse-status" });
  const body = ui.el("tbody");
  const records = ui.el("table", { id: "records" }, ui.el("thead", {}, ui.el("tr", {},
    ["Offset", "Timestamp", "Key", "Value", "Headers"].map((t) => ui.el("th", {}, t)))), body);
  root.append(form, status, records, produceForm(ui, fields.topic, fields.partition, () => show()));

  async function show() {
    const name = fields.topic.value.trim();
    if (!name) { status.textContent = "Name a topic."; return; }
    const params = new URLSearchParams({ partition: fields.partition.value || "0", from: fields.from.value,
      order: fields.order.value, key_format: fields.key_format.value, value_format: fields.value_format.value,
      filter: fields.filter.value, limit: "50" });
    if (fields.from.value === "offset") params.set("offset", fields.offset.value || "0");
    if (fields.from.value === "timestamp") params.set("timestamp", String(Date.parse(fields.timestamp.value) || 0));
    status.textContent = "Loading…";
    try {
      const data = await ui.api(`/messages/${encodeURIComponent(name)}?${params}`);
      status.textContent = `${data.records.length} records (partition ${data.partition}: offsets ${data.log_start}` +
        ` to ${data.end}; ${data.scanned} read)`;
      body.replaceChildren(...data.records.map((r) => ui.el("tr", { class: "record", "data-offset": r.offset },
        ui.el("td", { class: "num" }, r.offset), ui.el("td", {}, ui.formatTime(r.timestamp)),
        ui.el("td", {}, shown(ui, r.key)), ui.el("td", { class: "value" }, shown(ui, r.value)),
        ui.el("td", {}, r.headers.map((h) => ui.el("div", {}, `${h.key}: ${h.value.shown ?? "null"}`))))));
    } catch (error) {
      status.textContent = `${error.name}: ${error.message}`;
      status.className = "error";
      body.replaceChildren();
    }
  }

  form.addEventListener("submit", (event) => { event.preventDefault(); show(); });
  if (topic) show();
}

function shown(ui, part) {
  if (part.shown === null) return ui.el("span", { class: "muted" }, "null");
  const note = [part.schema_id !== undefined ? `schema ${part.schema_id}` : null, part.error || null,
    part.truncated ? `${part.size} bytes, cut` : null].filter(Boolean).join("; ");
  return ui.el("div", {}, ui.el("pre", { class: "value" }, part.shown), note ? ui.el("small", { class: "muted" }, note) : null);
}

function produceForm(ui, topicField, partitionField, after) {
  const key = ui.el("input", { name: "produce-key", placeholder: "key (empty: null)" });
  const value = ui.el("textarea", { name: "produce-value", rows: 3, cols: 50, placeholder: "value" });
  const headers = ui.el("textarea", { name: "produce-headers", rows: 2, cols: 30, placeholder: "name=value per line" });
  const send = ui.el("button", { type: "submit", id: "produce" }, "Produce");
  const form = ui.el("form", { class: "toolbar", id: "produce-form" }, ui.el("label", {}, "Key", key),
    ui.el("label", {}, "Value", value), ui.el("label", {}, "Headers", headers), send);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const pairs = headers.value.split("\n").filter((l) => l.trim()).map((l) => {
      const at = l.indexOf("=");
      return at < 0 ? [l, ""] : [l.slice(0, at), l.slice(at + 1)];
    });
    try {
      const done = await ui.api(`/messages/${encodeURIComponent(topicField.value.trim())}`, { method: "POST", body: {
        key: key.value === "" ? null : key.value, value: value.value, headers: pairs,
        partition: partitionField.value === "" ? null : Number(partitionField.value) } });
      ui.toast(`Produced at offset ${done.offset} of partition ${done.partition}`, "info");
      after();
    } catch (error) {
      ui.toast(`${error.name}: ${error.message}`);
    }
  });
  return ui.el("div", {}, ui.el("h2", {}, "Produce a record"), form);
}
