"""`__transaction_state`: the transaction coordinator's log, an ordinary replicated topic.

Each record is one transactional id's state after a transition (key: the id,
value: `metadata.encode`, null: the id was removed). The coordinator of a
partition is the partition's leader: it appends through the same partition lock
as every other writer, and a transition counts only once the high watermark has
passed it (every in-sync replica holds it), so a new leader, which loads the
partition from its own log, knows every transition that was acknowledged.
Loading reads the log from its start to its end, keeping the last state per id.

The topic is compacted, as Kafka's is: the log cleaner keeps each id's last record
(and drops a removed id's null record after `delete.retention.ms`), so the log
stays about as large as the live ids; nothing is dropped by time, which would
forget live transactional ids. Compaction leaves offset gaps, which loading steps
over batch by batch.
"""

from __future__ import annotations

from mmlog.transactions.metadata import TxnState, decode, encode
from mmlog.protocol import records

TOPIC = "__transaction_state"
READ_CHUNK = 1 << 20


def topic_configs(config, replication: int) -> dict[str, str]:
    """The internal topic's settings (Kafka: transaction.state.log.*; the minimum ISR at most the replicas)."""
    return {
        "cleanup.policy": "compact",
        "segment.bytes": str(config["transaction.state.log.segment.bytes"]),
        "min.insync.replicas": str(min(config["transaction.state.log.min.isr"], replication)),
        "unclean.leader.election.enable": "false",
    }


def append(part, transactional_id: str, state: TxnState | None) -> int:
    """Append one transition; returns its offset (replicated once the HW is past it)."""
    value = None if state is None else encode(state)
    info = part.append(records.build_batch([(transactional_id.encode(), value)]))
    return info.last_offset


def load(part) -> dict[str, TxnState]:
    """Every transactional id's last state in the partition's log (removed ids left out)."""
    states: dict[str, TxnState | None] = {}
    offset = part.log_start_offset
    while offset < part.log_end_offset:
        data = part.read(offset, READ_CHUNK, upto_log_end=True).slice.read()
        moved = False
        for pos, header in records.iter_batches(data):
            if header.next_offset <= offset or header.is_control:
                continue
            for record in records.decode_records(data, pos):
                if record.offset >= offset and record.key is not None:
                    states[record.key.decode()] = None if record.value is None else decode(record.value)
            offset, moved = header.next_offset, True
        if not moved:
            break
    return {k: v for k, v in states.items() if v is not None}
