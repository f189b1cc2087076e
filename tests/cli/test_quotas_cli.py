"""`mmlog quotas describe|alter|broker` against a real broker: what it prints, and one-line errors for bad input."""

from __future__ import annotations

import pytest

from mmlog.cli import main as cli
from mmlog.client.admin import Admin
from mmlog.testing import EmbeddedBroker


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("broker"), processors=1) as b:
        yield b


def run(capsysbinary, *argv) -> tuple[int, str, str]:
    status = cli.main(list(argv))
    out = capsysbinary.readouterr()
    return status, out.out.decode(), out.err.decode()


def test_alter_describe_and_remove_quotas(broker, capsysbinary):
    b = ("--bootstrap", broker.bootstrap)
    assert run(capsysbinary, "quotas", "alter", "--user-default", "--client-id", "etl", "--set",
               "consumer_byte_rate=2048", "--set", "request_percentage=12.5", *b)[:2] == (
        0, "altered quotas of user=<default>,client-id=etl\n")
    assert run(capsysbinary, "quotas", "alter", "--client-id", "x", "--set", "producer_byte_rate=1", "--validate-only",
               *b)[:2] == (0, "validated quotas of client-id=x\n")
    status, out, _ = run(capsysbinary, "quotas", "describe", *b)
    assert (status, out) == (0, "user=<default>,client-id=etl\tconsumer_byte_rate=2048 request_percentage=12.5\n")
    assert run(capsysbinary, "quotas", "alter", "--user-default", "--client-id", "etl", "--remove",
               "consumer_byte_rate", "--remove", "request_percentage", *b)[0] == 0
    assert run(capsysbinary, "quotas", "describe", *b)[:2] == (0, "")


@pytest.mark.parametrize("argv, message", [
    (["alter", "--client-id", "x", "--set", "bogus_rate=1"], "Invalid configuration key bogus_rate"),
    (["alter", "--client-id", "x", "--set", "producer_byte_rate=fast"], "'fast' is not a number"),
    (["alter", "--set", "producer_byte_rate=1"], "give --client-id, --client-id-default, --user or --user-default"),
    (["broker", "--broker", "0", "--set", "log.dirs=/x"], "Cannot update these configs dynamically: log.dirs"),
    (["broker", "--set", "log.retention.ms=1"], "give --broker ID or --cluster-default"),
])
def test_bad_input_is_one_line(broker, capsysbinary, argv, message):
    status, out, err = run(capsysbinary, "quotas", *argv, "--bootstrap", broker.bootstrap)
    assert status != 0 and out == "" and message in err and err.count("\n") == 1


def test_a_dynamic_broker_config_set_from_the_cli(broker, capsysbinary):
    assert run(capsysbinary, "quotas", "broker", "--cluster-default", "--set", "log.retention.ms=86400000",
               "--bootstrap", broker.bootstrap)[:2] == (0, "altered dynamic configs of the cluster default\n")
    with Admin(broker.bootstrap) as admin:
        assert admin.broker_config(0)["log.retention.ms"] == ("86400000", 3)
    assert run(capsysbinary, "quotas", "broker", "--cluster-default", "--remove", "log.retention.ms",
               "--bootstrap", broker.bootstrap)[0] == 0
