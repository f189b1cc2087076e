// The Cluster page: brokers, the partitions offline / under-replicated / under min ISR (each count a link to
// the list of them), log dirs and their use. #/cluster/partitions/<state> lists one state's partitions,
// #/cluster/dir/<broker>/<dir> the partitions a log dir holds.
const LABELS = { offline: "Offline", under_replicated: "Under-replicated", under_min_isr: "Under min ISR" };

export async function render(root, { parts }, ui) {
  if (parts[0] === "partitions") return partitions(root, parts[1] || "under_replicated", ui);
  if (parts[0] === "dir") return dirPartitions(root, parts[1], parts.slice(2).join("/"), ui);
  const data = await ui.api("/cluster");
  root.append(ui.el("h1", {}, "Cluster"), ui.el("p", { class: "muted" }, `Cluster id ${data.cluster_id || ""}`));
  root.append(ui.el("div", { class: "cards" }, Object.entries(LABELS).map(([state, label]) => {
    const n = data.partitions[state];
    return ui.el("a", { class: "card", href: `#/cluster/partitions/${state}`, id: `count-${state}` },
      ui.el("div", { class: `big ${n ? "bad" : "ok"}` }, n), ui.el("div", {}, `${label} partitions`));
  })));
  root.append(ui.el("h2", {}, "Brokers"), ui.el("table", { id: "brokers" },
    ui.el("thead", {}, ui.el("tr", {}, ["Id", "Address", "Rack", "Up since", "Controller"].map((t) => ui.el("th", {}, t)))),
    ui.el("tbody", {}, data.brokers.map((b) => ui.el("tr", {},
      ui.el("td", {}, b.id), ui.el("td", {}, b.address), ui.el("td", {}, b.rack || ""),
      ui.el("td", {}, ui.formatTime(b.up_since)), ui.el("td", {}, b.controller ? "yes" : ""))))));
  root.append(ui.el("h2", {}, "Log dirs"));
  const dirs = ui.el("div", {}, ui.el("p", { class: "muted" }, "Loading…"));
  root.append(dirs);
  const { log_dirs: found } = await ui.api("/cluster/log-dirs");
  if (!found.length) dirs.replaceChildren(ui.el("p", { class: "muted" }, "Not shown: DESCRIBE on the cluster is needed."));
  else dirs.replaceChildren(ui.el("table", { id: "log-dirs" },
    ui.el("thead", {}, ui.el("tr", {}, ["Broker", "Directory", "Partitions", "Size", "Free", "Capacity"].map((t, i) =>
      ui.el("th", { class: i > 1 ? "num" : null }, t)))),
    ui.el("tbody", {}, found.map((d) => ui.el("tr", {},
      ui.el("td", {}, d.broker), ui.el("td", {}, d.dir),
      ui.el("td", { class: "num" }, ui.link(String(d.partitions), ui.hashFor("cluster", "dir", d.broker, d.dir))),
      ui.el("td", { class: "num" }, ui.formatBytes(d.size)), ui.el("td", { class: "num" }, ui.formatBytes(d.free)),
      ui.el("td", { class: "num" }, ui.formatBytes(d.capacity)))))));
}

function dirPartitions(root, broker, dir, ui) {
  root.append(ui.el("p", {}, ui.link("‹ Cluster", "#/cluster")),
    ui.el("h1", {}, `Partitions in ${dir} on broker ${broker}`));
  root.append(ui.table(`/cluster/log-dirs/partitions?broker=${encodeURIComponent(broker)}&dir=${encodeURIComponent(dir)}`, [
    { title: "Topic", value: (p) => ui.link(p.topic, ui.hashFor("topics", p.topic)) },
    { title: "Partition", value: (p) => p.partition, num: true },
    { title: "Size", value: (p) => ui.formatBytes(p.size), num: true },
  ], { search: true, empty: "None." }));
}

function partitions(root, state, ui) {
  root.append(ui.el("p", {}, ui.link("‹ Cluster", "#/cluster")),
    ui.el("h1", {}, `${LABELS[state] || state} partitions`));
  const list = (xs) => xs.join(", ");
  root.append(ui.table(`/cluster/partitions?state=${encodeURIComponent(state)}`, [
    { title: "Topic", value: (p) => ui.link(p.topic, ui.hashFor("topics", p.topic)) },
    { title: "Partition", value: (p) => p.partition, num: true },
    { title: "Leader", value: (p) => (p.leader < 0 ? "none" : p.leader), num: true },
    { title: "Replicas", value: (p) => list(p.replicas) },
    { title: "ISR", value: (p) => list(p.isr) },
  ], { search: true, empty: "None." }));
}
