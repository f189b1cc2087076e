"""The paper benchmark: the Kafka paper's section 5 on this machine, mmlog beside its peers.

    python -m tools.bench [--quick] [--messages N] [--systems mmlog,redis,rabbitmq] [--out DIR]

One run measures, each client in a process of its own:

* the producer test: 200-byte messages, batches of 1 and of 50, asynchronous
  flush (`mmlog_driver`, `redis_driver`, `rabbitmq_driver`);
* the consumer test: one consumer pulling about 1,000 messages (200 KB) a time;
* the machine's ceilings: loopback `os.sendfile` of a page-cached file, and raw
  appends of the same bytes (`ceilings`);
* end-to-end latency at a fixed rate (`latency`);

then prints a table, draws the paper's Figures 4 and 5 and writes
`docs/benchmarks.md` (`report`). Redis and RabbitMQ come from Debian packages
and are started on loopback, in a temporary directory, by the run itself
(`servers`); Redis's upper bound is a raw-protocol sender (`resp`); `--profile`
runs py-spy on mmlog's producer and broker (`profile`). `run` ties them together.

`tools/bench_peers.py` reuses these pieces for the log-structured
peers: librdkafka against mmlog (`kafka_driver`), RabbitMQ Streams through
rstream (`rstream_driver`, `servers.RabbitServer(streams=True)`), NATS JetStream
through nats-py (`nats_driver`, `servers.NatsServer`), beside Redis Streams, with
each server's CPU from /proc (`servers.cpu_seconds`).
"""
