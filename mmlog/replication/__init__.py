"""Replication: followers copy their leaders' logs, and the rules that keep the copies honest.

Layer: above `mmlog.log` and `mmlog.ipc`, below `mmlog.processors` (which throttle leaders' replica reads
with `leader_throttle.py`). The rules: a partition's state (`leader_and_isr.py`), who leads it
(`election.py`, applied by the controller in `mmlog/cluster/`), who is in sync (`isr.py`, applied by the
leader's main process). The copying: the main process publishes what to follow (`fetch_plan.py`); the
fetcher process (`fetcher.py`) keeps one connection and one thread per leader broker (`source.py`), each
fetching all the partitions it follows from that leader in one request, and appends through the same
partition lock as the processors (`Partition.append_replica`, `mmlog/log/replica_state.py`);
`throttle.py` bounds a follower's fetch rate.
"""
