// The page shell: the navigation bar, the login form when the broker asks for one, and hash routing to
// the page modules (static/pages/<area>.js, each exporting render(root, params, ui)).
import * as ui from "./ui.js";

const AREAS = ["Cluster", "Topics", "Messages", "Groups", "Schemas", "Security", "Metrics"];
const page = document.getElementById("page");
let session = null;

function route() {
  const [path, query = ""] = location.hash.replace(/^#\/?/, "").split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { area: (parts[0] || "cluster").toLowerCase(), parts: parts.slice(1),
           query: Object.fromEntries(new URLSearchParams(query)) };
}

function drawNav(active) {
  document.getElementById("nav").replaceChildren(...AREAS.map((name) =>
    ui.el("a", { href: `#/${name.toLowerCase()}`, class: name.toLowerCase() === active ? "active" : null }, name)));
  document.getElementById("who").textContent = session && session.user ? session.user : "";
  document.getElementById("logout").hidden = !(session && session.user);
}

function loginForm() {
  const user = ui.el("input", { name: "user", autocomplete: "username", required: true });
  const password = ui.el("input", { name: "password", type: "password", autocomplete: "current-password" });
  const message = ui.el("p", { class: "error" });
  const form = ui.el("form", { class: "login", id: "login" }, ui.el("h1", {}, "Log in"),
    ui.el("label", {}, "User", user), ui.el("label", {}, "Password", password), message,
    ui.el("button", { type: "submit" }, "Log in"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      session = await ui.api("/login", { method: "POST", body: { user: user.value, password: password.value } });
      ui.setCsrf(session.csrf);
      show();
    } catch (error) {
      message.textContent = error.status === 401 ? "Wrong user name or password." : error.message;
    }
  });
  return form;
}

async function show() {
  const { area, parts, query } = route();
  drawNav(session && session.csrf ? area : null);
  if (!session || !session.csrf) {
    page.replaceChildren(loginForm());
    return;
  }
  const root = ui.el("div", { class: `page page-${area}` });
  page.replaceChildren(root);
  let module;
  try {
    if (!AREAS.map((name) => name.toLowerCase()).includes(area)) throw new Error(area);
    module = await import(`./pages/${area}.js`);
  } catch (error) {
    root.append(ui.el("p", { class: "muted" }, `The ${area} page is not available.`));
    return;
  }
  try {
    await module.render(root, { parts, query }, ui);
  } catch (error) {
    if (error.status === 401) { session = null; show(); return; }
    ui.showError(root, error);
  }
}

async function start() {
  document.getElementById("logout").addEventListener("click", async () => {
    try { await ui.api("/logout", { method: "POST" }); } catch (error) { /* ended anyway */ }
    session = null;
    show();
  });
  try {
    session = await ui.api("/session");
    ui.setCsrf(session.csrf || null);
  } catch (error) {
    session = null;
  }
  window.addEventListener("hashchange", show);
  show();
}

start();
