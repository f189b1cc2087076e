"""One local[2] SparkSession and one broker for every Spark test: a session costs about 7 s and 0.6 GiB."""

from __future__ import annotations

import re

import pytest

from mmlog.client import Admin, Producer
from mmlog.spark.session import local_session, stop_session
from mmlog.testing import EmbeddedBroker


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    session = local_session("mmlog-tests", **{"spark.sql.warehouse.dir": str(tmp_path_factory.mktemp("warehouse"))})
    yield session
    stop_session(session)


@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    """A broker shared by the Spark tests, serving the schema registry too; each test uses topics of its own."""
    with EmbeddedBroker(tmp_path_factory.mktemp("spark-broker"), processors=2,
                        config={"schema.registry.listeners": "http://127.0.0.1:0"}) as b:
        yield b


@pytest.fixture
def topic(broker, request):
    """A fresh 3-partition topic named after the test."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name)[:100]
    with Admin(broker.bootstrap) as admin:
        admin.create_topic(name, partitions=3)
    return name


@pytest.fixture
def produce(broker):
    """send(topic, [(partition, key, value, headers), ...]): the records, acknowledged by all; their metadata."""

    def send(topic: str, records, timestamp: int | None = None) -> list:
        with Producer(broker.bootstrap, acks="all", linger_ms=1) as producer:
            futures = [producer.send(topic, value, key=key, partition=p, headers=headers, timestamp=timestamp)
                       for p, key, value, headers in records]
            return [f.get(timeout=30) for f in futures]

    return send
