"""The web console: pages served by the broker on `console.listeners`, over a JSON API under /console/api/.

The console is a client of its own cluster: each session gets Kafka clients (`clients.py`) connected to
this broker's own listener as the logged-in user, so the broker's ACLs decide every read and action
exactly as for the Kafka API. When the Kafka listeners require SASL a login is asked for (the user's
password is checked against the broker's users and kept server-side only, `sessions.py`); otherwise
every visitor is anonymous, as on a PLAINTEXT listener.

Modules: `app` (mounting on the broker's HTTP server, static files, security headers), `sessions`
(server-side sessions, their cookie and CSRF token), `clients` (a session's Admin, Consumer, Producer),
`router` (the API convention below), `paging`, `errors`, and `api/` (one module per page area).

How a page is added (one API module + one JS module, nothing else to edit):
- `mmlog/console/api/<area>.py` defines `routes = Routes()` and its handlers with `@routes.get("/path")`
  (or `.post`, `.put`, `.delete`); paths are under /console/api/. Every module of the package is found
  and mounted by `app.mount`. A handler is a plain function `handler(call) -> JSON-able` run on the web
  server's executor (never on the loop), one at a time per session: it may block on Kafka clients.
  `call.session` (its `admin()`, `consumer()`, `producer()`), `call.query` (strings), `call.params` (the
  path's `{name}` parts), `call.body` (JSON object of a POST/PUT), `call.console` (the broker's config,
  cluster view, registry). Lists are paged and filtered server-side: `paging.page(items, call)` reads
  `page`, `size`, `q`. A Kafka error raised by a client becomes a JSON error with its name
  (TOPIC_AUTHORIZATION_FAILED -> 403, `errors.py`); `ConsoleError(status, name, message)` for others.
  POST/PUT/DELETE need the session's CSRF token (the shell's `api()` sends it); GET never changes state.
- `mmlog/console/static/pages/<area>.js` exports `render(root, params, ui)`, called when the hash route
  `#/<area>/...` is shown: `root` is the emptied page element, `params` the route's parts and query,
  `ui` the helpers of `static/ui.js` (`api`, `el`, `table`, `chart`, `link`, `toast`, `formatBytes`).
  Everything from data goes into the page as text (`el` sets textContent), never as HTML. The navigation
  bar (static/app.js) names the areas: Cluster, Topics, Messages, Groups, Schemas, Security, Metrics.
docs/console.md says what each page shows and which ACL each action needs.
"""
