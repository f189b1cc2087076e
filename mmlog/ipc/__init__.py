"""What a broker's processes share: the structures both the main process and the processors use.

- `cluster_view`: the cluster as the main process last saw it (live brokers, the
  controller, group coordinators), published as a file that processors re-read when
  it is replaced;
- `control_channel`: the request/reply channel from each processor to the main
  process (topic admin, group coordination, producer ids);
- `wake_board`: eventfds and parked-request counters, so an append in one processor
  wakes long polls parked in another;
- `metrics_block`: the counters and histograms every process bumps without locks, one
  region per process, that the main process sums when Prometheus scrapes it;
- `heartbeats`: the time of each processor loop's last turn, which the supervisor
  watches for a processor that stalls.

docs/architecture.md draws where this package sits among the others; `tests/test_layering.py` checks it.
"""
