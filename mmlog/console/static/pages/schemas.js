// The Schemas page: the registry's subjects, a subject's versions, two versions side by side with their
// differences, and its compatibility level (changed by users the ACLs allow).

const DIFF_BACKGROUND = { equal: "", delete: "#fde8e8", insert: "#e6f4ea", replace: "#fff4e0" };

export async function render(root, { parts }, ui) {
  if (parts.length) return renderSubject(root, parts[0], ui);
  const types = await ui.api("/schemas/types");
  root.append(ui.el("h1", {}, "Schemas"), ui.el("p", { class: "muted" }, `Schema types: ${types.join(", ")}`),
    ui.table("/schemas/subjects", [
      { title: "Subject", value: (s) => ui.link(s.subject, ui.hashFor("schemas", s.subject)) },
      { title: "Type", value: (s) => s.type },
      { title: "Versions", num: true, value: (s) => s.versions },
      { title: "Latest", num: true, value: (s) => s.latest },
      { title: "Id", num: true, value: (s) => s.id },
      { title: "Compatibility", value: (s) => s.compatibility },
    ], { search: true, size: 25, empty: "No subjects." }));
}

async function renderSubject(root, subject, ui) {
  const path = `/schemas/subjects/${encodeURIComponent(subject)}`;
  const detail = await ui.api(path);
  const numbers = detail.versions.map((v) => v.version);
  const pick = (id, chosen) => ui.el("select", { id }, numbers.map((n) =>
    ui.el("option", { value: n, selected: n === chosen }, `version ${n}`)));
  const left = pick("diff-left", numbers.length > 1 ? numbers[numbers.length - 2] : numbers[0]);
  const right = pick("diff-right", numbers[numbers.length - 1]);
  const diff = ui.el("div", { id: "diff" });
  const level = ui.el("select", { id: "compat-level" }, detail.levels.map((l) =>
    ui.el("option", { value: l, selected: l === detail.compatibility }, l)));
  const message = ui.el("span", { id: "compat-message" });
  const save = ui.el("button", { type: "button", id: "compat-save", onclick: async () => {
    try {
      const done = await ui.api(`${path}/compatibility`, { method: "PUT", body: { compatibility: level.value } });
      message.className = "ok";
      message.textContent = `Saved: ${done.compatibility}`;
    } catch (error) {
      message.className = "error";
      message.textContent = error.status === 403 ? "Refused: you may not change this subject's level."
        : `${error.name}: ${error.message}`;
    }
  } }, "Save");
  async function compare() {
    const c = await ui.api(`${path}/compare?left=${left.value}&right=${right.value}`);
    diff.replaceChildren(ui.el("table", { class: "diff" },
      ui.el("tr", {}, ui.el("th", { colspan: 2 }, `version ${c.left.version} (id ${c.left.id})`),
        ui.el("th", { colspan: 2 }, `version ${c.right.version} (id ${c.right.id})`)),
      c.diff.map((r) => {
        const row = ui.el("tr", { class: `diff-${r.op}` },
          ui.el("td", { class: "num muted" }, r.left ? r.left[0] : ""),
          ui.el("td", {}, ui.el("pre", { class: "value" }, r.left ? r.left[1] : "")),
          ui.el("td", { class: "num muted" }, r.right ? r.right[0] : ""),
          ui.el("td", {}, ui.el("pre", { class: "value" }, r.right ? r.right[1] : "")));
        row.style.background = DIFF_BACKGROUND[r.op];  // set through the DOM: the CSP allows no inline style
        return row;
      })));
  }
  left.addEventListener("change", compare);
  right.addEventListener("change", compare);
  root.append(ui.el("p", {}, ui.link("‹ Schemas", "#/schemas")), ui.el("h1", {}, `Subject ${subject}`),
    ui.el("div", { class: "toolbar" }, ui.el("label", {}, "Compatibility", level), save, message),
    ui.el("h2", {}, "Versions"), ui.el("table", {},
      ui.el("tr", {}, ["Version", "Id", "Type", "References"].map((t) => ui.el("th", {}, t))),
      detail.versions.map((v) => ui.el("tr", {}, ui.el("td", {}, v.version), ui.el("td", {}, v.id),
        ui.el("td", {}, v.type), ui.el("td", {}, v.references.map((r) => `${r.name} → ${r.subject}/${r.version}`)
          .join(", "))))),
    ui.el("h2", {}, "Compare"), ui.el("div", { class: "toolbar" }, left, right), diff);
  await compare();
}
