"""Error codes counted from a response body by its schema: top level, per topic and per partition,
whether the handler built entries as structs or dicts."""

from mmlog.processors.request_metrics import count_errors
from mmlog.protocol.messages import metadata


class Counted:
    def __init__(self) -> None:
        self.codes: list[tuple[int, int]] = []

    def error(self, api: int, code: int) -> None:
        self.codes.append((api, code))


def test_every_non_zero_error_code_is_counted_at_every_depth():
    partitions = [{"error_code": code, "partition_index": p, "leader_id": 0, "replica_nodes": [0, 1],
                   "isr_nodes": [0], "offline_replicas": []} for p, code in enumerate([0, 5, 0, 56])]
    body = metadata.RESPONSE(throttle_time_ms=0, brokers=[], cluster_id=None, controller_id=0, topics=[
        {"error_code": 3, "name": "gone", "partitions": []},
        {"error_code": 0, "name": "here", "partitions": partitions}])
    counted = Counted()
    count_errors(counted, metadata.API_KEY, body)
    assert sorted(counted.codes) == [(3, 3), (3, 5), (3, 56)]


def test_a_response_without_errors_counts_nothing():
    body = metadata.RESPONSE(throttle_time_ms=0, brokers=[], cluster_id=None, controller_id=0, topics=[
        {"error_code": 0, "name": "t", "partitions": [{"error_code": 0, "partition_index": 0, "leader_id": 0,
                                                       "replica_nodes": [0], "isr_nodes": [0]}]}])
    counted = Counted()
    count_errors(counted, metadata.API_KEY, body)
    assert counted.codes == []
