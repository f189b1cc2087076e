// The Topics pages: a searchable, paged list; #/topics/<name> one topic (partitions, configs, rate chart).
export async function render(root, { parts }, ui) {
  if (parts.length) return topic(root, parts[0], ui);
  root.append(ui.el("h1", {}, "Topics"));
  root.append(ui.table("/topics", [
    { title: "Name", value: (t) => ui.link(t.name, ui.hashFor("topics", t.name)) },
    { title: "Partitions", value: (t) => t.partitions, num: true },
    { title: "Replication", value: (t) => t.replication_factor, num: true },
    { title: "Under-replicated", value: (t) => t.under_replicated || "", num: true },
    { title: "Size", value: (t) => (t.size === null ? "" : ui.formatBytes(t.size)), num: true },
    { title: "Records", value: (t) => t.records, num: true },
    { title: "Messages/s", value: (t) => (t.rate === null ? "" : t.rate), num: true },
  ], { search: true, empty: "No topics (or none you may describe)." }));
}

async function topic(root, name, ui) {
  const data = await ui.api(`/topics/${encodeURIComponent(name)}`);
  root.append(ui.el("p", {}, ui.link("‹ Topics", "#/topics")), ui.el("h1", {}, data.name),
    ui.el("p", {}, ui.link("Browse messages", ui.hashFor("messages", data.name))));
  root.append(ui.el("h2", {}, "Messages in per second"));
  const chartBox = ui.el("div", { id: "rate-chart" }, ui.chart([{ name: "messages/s", points: data.rate }]));
  root.append(chartBox);
  const timer = setInterval(async () => {
    if (!chartBox.isConnected) { clearInterval(timer); return; }
    try {
      await ui.api(`/topics/${encodeURIComponent(name)}`);  // a sample of its offsets
      const { rate } = await ui.api(`/topics/${encodeURIComponent(name)}/rate`);
      chartBox.replaceChildren(ui.chart([{ name: "messages/s", points: rate }]));
    } catch (error) { clearInterval(timer); }
  }, 5000);
  root.append(ui.el("h2", {}, "Partitions"), ui.el("table", { id: "partitions" },
    ui.el("thead", {}, ui.el("tr", {}, ["Partition", "Leader", "Replicas", "ISR", "Log start", "High watermark",
      "Last stable", "Size"].map((t) => ui.el("th", {}, t)))),
    ui.el("tbody", {}, data.partitions.map((p) => ui.el("tr", { class: p.isr.length < p.replicas.length ? "warn" : null },
      ui.el("td", {}, p.partition), ui.el("td", {}, p.leader < 0 ? "none" : p.leader),
      ui.el("td", {}, p.replicas.join(", ")), ui.el("td", {}, p.isr.join(", ")),
      ui.el("td", { class: "num" }, p.log_start ?? ""), ui.el("td", { class: "num" }, p.high_watermark ?? ""),
      ui.el("td", { class: "num" }, p.last_stable_offset ?? ""),
      ui.el("td", { class: "num" }, p.size === null ? "" : ui.formatBytes(p.size)))))));
  root.append(ui.el("h2", {}, "Configs"));
  if (data.configs_refused) {
    root.append(ui.el("p", { class: "muted" }, `Not shown: ${data.configs_refused}`));
    return;
  }
  if (!data.can_alter) root.append(ui.el("p", { class: "muted", id: "read-only" }, "You may not alter these configs (ALTER_CONFIGS)."));
  root.append(ui.el("table", { id: "configs" },
    ui.el("thead", {}, ui.el("tr", {}, ["Name", "Value", "Source", ""].map((t) => ui.el("th", {}, t)))),
    ui.el("tbody", {}, data.configs.map((c) => configRow(name, c, ui)))));
}

function configRow(topic, config, ui) {
  const input = ui.el("input", { value: config.value ?? "", "aria-label": config.name, "data-config": config.name,
    disabled: config.read_only || config.sensitive });
  const save = ui.el("button", { type: "button", class: "plain", disabled: config.read_only || config.sensitive },
    "Save");
  const reset = ui.el("button", { type: "button", class: "plain", hidden: config.source !== "topic" }, "Reset");
  const source = ui.el("td", {}, config.source);
  const path = `/topics/${encodeURIComponent(topic)}/configs`;
  save.addEventListener("click", async () => {
    try {
      await ui.api(path, { method: "PUT", body: { set: { [config.name]: input.value } } });
      source.textContent = "topic";
      reset.hidden = false;
      ui.toast(`${config.name} set to ${input.value}`, "info");
    } catch (error) {
      ui.toast(`${error.name}: ${error.message}`);
    }
  });
  reset.addEventListener("click", async () => {
    try {
      await ui.api(path, { method: "PUT", body: { delete: [config.name] } });
      ui.toast(`${config.name} back to its default`, "info");
      location.reload();
    } catch (error) {
      ui.toast(`${error.name}: ${error.message}`);
    }
  });
  return ui.el("tr", {}, ui.el("td", {}, config.name), ui.el("td", {}, input), source,
    ui.el("td", {}, save, " ", reset));
}
