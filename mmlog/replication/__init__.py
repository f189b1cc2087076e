"""Replica fetching: followers copy their leaders' logs (one process under the supervisor).

Layer: beside `mmlog.processors`, above `mmlog.log` and `mmlog.ipc`. The main process
publishes what to follow (`fetch_plan.py`); the fetcher process keeps one connection
and one thread per leader broker (`source.py`), each fetching all the partitions it
follows from that leader in one request, and appends through the same partition
lock as the processors (`Partition.append_replica`).
"""
