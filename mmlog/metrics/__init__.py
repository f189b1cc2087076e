"""The broker's Prometheus endpoint ("Metrics").

- `exposition`: the text format;
- `families`: what a scrape shows, from the shared metrics block (`ipc/metrics_block.py`,
  written by every process without locks) and the main process's own state;
- `endpoint`: the HTTP server thread (`metrics.listen`).

docs/metrics.md lists every family.
"""
