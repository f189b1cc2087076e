"""The console's JSON API, one module per page area, each with its `routes` (mmlog/console/__init__.py says
the convention); `app.mount` mounts every module found here."""
