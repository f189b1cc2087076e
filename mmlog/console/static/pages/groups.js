// The Groups page: a searchable list of consumer groups with their lag; a group's state, members,
// offsets and lag per partition, its lag over the last hour, and resetting its offsets (dry run, apply).

const REFRESH_MS = 5000;

export async function render(root, { parts }, ui) {
  if (parts.length) return renderGroup(root, parts[0], ui);
  root.append(ui.el("h1", {}, "Consumer groups"), ui.table("/groups", [
    { title: "Group", value: (g) => ui.link(g.group, ui.hashFor("groups", g.group)) },
    { title: "State", value: (g) => ui.el("span", { class: stateClass(g.state) }, g.state) },
    { title: "Members", num: true, value: (g) => g.members },
    { title: "Topics", value: (g) => g.topics.join(", ") },
    { title: "Partitions", num: true, value: (g) => g.partitions },
    { title: "Lag", num: true, value: (g) => g.lag },
  ], { search: true, size: 25, empty: "No consumer groups." }));
}

function stateClass(state) {
  return state === "Stable" ? "ok" : state === "Empty" ? "muted" : "warn";
}

async function renderGroup(root, group, ui) {
  const cards = ui.el("div", { class: "cards" });
  const chartBox = ui.el("div", { id: "lag-chart" });
  const members = ui.el("div");
  const partitions = ui.el("div");
  root.append(ui.el("p", {}, ui.link("‹ Groups", "#/groups")), ui.el("h1", {}, `Group ${group}`), cards,
    ui.el("h2", {}, "Lag over the last hour"), chartBox, ui.el("h2", {}, "Members"), members,
    ui.el("h2", {}, "Partitions"), partitions, ui.el("h2", {}, "Reset offsets"), resetForm(group, ui));
  const path = `/groups/${encodeURIComponent(group)}`;

  async function refresh() {
    const detail = await ui.api(path);
    const history = await ui.api(`${path}/lag`);
    cards.replaceChildren(card("State", detail.state, ui), card("Protocol", detail.protocol || "–", ui),
      card("Members", detail.members.length, ui), card("Lag", detail.lag, ui, "group-lag"));
    chartBox.replaceChildren(ui.chart([{ name: "lag", points: history.points.map(([t, v]) => [t * 1000, v]) }]));
    members.replaceChildren(memberTable(detail.members, ui));
    partitions.replaceChildren(partitionTable(detail.partitions, ui));
  }

  await refresh();
  const timer = setInterval(async () => {
    if (!root.isConnected) { clearInterval(timer); return; }
    try { await refresh(); } catch (error) { clearInterval(timer); ui.toast(`${error.name}: ${error.message}`); }
  }, REFRESH_MS);
}

function card(title, value, ui, id) {
  return ui.el("div", { class: "card" }, ui.el("div", { class: "muted" }, title),
    ui.el("div", { class: "big", id }, value));
}

function memberTable(members, ui) {
  if (!members.length) return ui.el("p", { class: "muted" }, "No active members.");
  return ui.el("table", {}, ui.el("tr", {}, ["Member", "Client", "Host", "Assigned"].map((t) => ui.el("th", {}, t))),
    members.map((m) => ui.el("tr", {}, ui.el("td", {}, m.member_id), ui.el("td", {}, m.client_id),
      ui.el("td", {}, m.host), ui.el("td", {}, m.assignment.map(([t, p]) => `${t}-${p}`).join(", ")))));
}

function partitionTable(rows, ui) {
  if (!rows.length) return ui.el("p", { class: "muted" }, "No committed offsets.");
  const show = (v) => (v === null ? "–" : v);
  return ui.el("table", { id: "group-partitions" },
    ui.el("tr", {}, ["Topic", "Partition", "Committed", "End", "Lag", "Member"].map((t, i) =>
      ui.el("th", { class: i && i < 5 ? "num" : null }, t))),
    rows.map((r) => ui.el("tr", {}, ui.el("td", {}, ui.link(r.topic, ui.hashFor("topics", r.topic))),
      ui.el("td", { class: "num" }, r.partition), ui.el("td", { class: "num" }, show(r.committed)),
      ui.el("td", { class: "num" }, show(r.end)), ui.el("td", { class: "num" }, show(r.lag)),
      ui.el("td", { class: "muted" }, r.member || ""))));
}

function resetForm(group, ui) {
  const target = ui.el("select", { id: "reset-target" },
    ["earliest", "latest", "timestamp", "offset"].map((t) => ui.el("option", { value: t }, t)));
  const value = ui.el("input", { id: "reset-value", placeholder: "offset, or ms since the epoch", size: 24 });
  const topics = ui.el("input", { id: "reset-topics", placeholder: "topics (comma-separated; all)", size: 28 });
  const plan = ui.el("div", { id: "reset-plan" });
  const message = ui.el("p", { id: "reset-message" });
  const path = `/groups/${encodeURIComponent(group)}/reset`;
  const dryRun = ui.el("button", { type: "button", id: "reset-dry-run", onclick: async () => {
    message.textContent = "";
    plan.replaceChildren();
    const body = { target: target.value, topics: topics.value.split(",").map((t) => t.trim()).filter(Boolean) };
    if (target.value === "timestamp" || target.value === "offset") body.value = value.value;
    try {
      showPlan(await ui.api(`${path}/plan`, { method: "POST", body }));
    } catch (error) {
      refused(error);
    }
  } }, "Dry run");

  function showPlan(result) {
    const apply = ui.el("button", { type: "button", id: "reset-apply", onclick: async () => {
      try {
        const done = await ui.api(`${path}/apply`, { method: "POST", body: { offsets: result.partitions } });
        message.className = "ok";
        message.textContent = `Reset ${done.applied.length} partition(s).`;
        apply.disabled = true;
      } catch (error) {
        refused(error);
      }
    } }, "Apply");
    plan.replaceChildren(ui.el("table", {},
      ui.el("tr", {}, ["Topic", "Partition", "Current", "New"].map((t, i) => ui.el("th", { class: i ? "num" : null }, t))),
      result.partitions.map((p) => ui.el("tr", {}, ui.el("td", {}, p.topic), ui.el("td", { class: "num" }, p.partition),
        ui.el("td", { class: "num" }, p.current === null ? "–" : p.current), ui.el("td", { class: "num" }, p.new)))),
    result.active_members ? ui.el("p", { class: "warn" },
      `The group has ${result.active_members} active member(s): Kafka will refuse the reset until they stop.`) : null,
    ui.el("div", { class: "toolbar" }, apply));
  }

  function refused(error) {
    message.className = "error";
    message.textContent = error.status === 403
      ? `Refused: ${error.name} (you may not change this group's offsets).` : `${error.name}: ${error.message}`;
  }

  return ui.el("div", {}, ui.el("div", { class: "toolbar" }, ui.el("label", {}, "Reset to", target),
    ui.el("label", {}, "Value", value), ui.el("label", {}, "Topics", topics), dryRun), plan, message);
}
