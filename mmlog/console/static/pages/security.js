// The Security page, for super users: the users (names, mechanisms and iterations; never a secret) and
// the ACL bindings, each paged and searched on the server.

export async function render(root, params, ui) {
  root.append(ui.el("h1", {}, "Security"));
  try {
    await ui.api("/security/users?size=1");
  } catch (error) {
    root.append(ui.el("p", { class: "error", id: "security-refused" },
      error.status === 403 ? "The Security page is for super users only." : `${error.name}: ${error.message}`));
    return;
  }
  root.append(ui.el("h2", {}, "Users"), ui.table("/security/users", [
    { title: "User", value: (u) => u.name },
    { title: "Mechanisms", value: (u) => u.mechanisms.map((m) => `${m.mechanism} (${m.iterations} iterations)`).join(", ") },
  ], { search: true, size: 25, empty: "No SCRAM users." }), ui.el("h2", {}, "ACLs"), ui.table("/security/acls", [
    { title: "Principal", value: (b) => b.principal },
    { title: "Permission", value: (b) => ui.el("span", { class: b.permission === "Deny" ? "bad" : null }, b.permission) },
    { title: "Operation", value: (b) => b.operation },
    { title: "Resource", value: (b) => `${b.resource_type}:${b.name}` },
    { title: "Pattern", value: (b) => b.pattern },
    { title: "Host", value: (b) => b.host },
  ], { search: true, size: 50, empty: "No ACLs." }));
}
