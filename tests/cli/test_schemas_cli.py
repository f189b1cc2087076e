"""`mmlog schemas register|list|get|check|delete|config` against a broker's registry: what it prints, the exit
status of an incompatible check, and one-line errors."""

from __future__ import annotations

import json

import pytest

from mmlog.cli import main as cli
from mmlog.testing import EmbeddedBroker

V1 = {"type": "record", "name": "Reading", "fields": [{"name": "celsius", "type": "double"}]}
V2 = {**V1, "fields": V1["fields"] + [{"name": "place", "type": "string", "default": "here"}]}
BREAKING = {**V1, "fields": [{"name": "celsius", "type": "string"}]}


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    config = {"schema.registry.listeners": "http://127.0.0.1:0"}
    with EmbeddedBroker(tmp_path_factory.mktemp("broker"), processors=1, config=config) as b:
        yield b.registry_urls[0]


def run(capsys, registry, *argv) -> tuple[int, str, str]:
    status = cli.main(["schemas", *argv, "--registry", registry])
    out = capsys.readouterr()
    return status, out.out, out.err


def schema_file(tmp_path, name: str, doc: dict):
    path = tmp_path / name
    path.write_text(json.dumps(doc, indent=2))
    return str(path)


def test_register_list_get_check_config_and_delete(registry, capsys, tmp_path):
    v1, v2, bad = (schema_file(tmp_path, n, d) for n, d in (("v1.avsc", V1), ("v2.avsc", V2), ("bad.avsc", BREAKING)))
    status, out, _ = run(capsys, registry, "register", "readings-value", v1)
    assert status == 0 and out.startswith("id ") and "\tversion 1\tsubject readings-value" in out
    assert run(capsys, registry, "check", "readings-value", v2)[:2] == (0, "compatible with readings-value version latest\n")
    status, out, _ = run(capsys, registry, "check", "readings-value", bad)
    assert status == 1 and out.startswith("incompatible with readings-value version latest:\n  ")
    assert run(capsys, registry, "register", "readings-value", v2)[0] == 0
    assert run(capsys, registry, "list")[1] == "readings-value\n"
    assert run(capsys, registry, "list", "readings-value")[1] == "1\n2\n"
    status, out, _ = run(capsys, registry, "get", "readings-value")
    assert status == 0 and "\tversion 2\t" in out and json.loads(out.split("\n", 1)[1]) == V2
    schema_id = int(out.split()[1])
    assert json.loads(run(capsys, registry, "get", "--id", str(schema_id))[1].split("\n", 1)[1]) == V2
    assert run(capsys, registry, "config")[1] == "global compatibility BACKWARD\n"
    assert run(capsys, registry, "config", "readings-value", "--set", "full")[1] == "readings-value compatibility FULL\n"
    assert run(capsys, registry, "delete", "readings-value", "1")[1] == "deleted readings-value version 1\n"
    assert run(capsys, registry, "list", "readings-value")[1] == "2\n"
    assert run(capsys, registry, "list", "readings-value", "--deleted")[1] == "1\n2\n"


@pytest.mark.parametrize("argv, status, message", [
    (["get", "nobody-value"], 1, "registry error 40401: Subject 'nobody-value' not found."),
    (["config", "--set", "SOMETIMES"], 1, "registry error 42203"),
    (["register", "x-value", "/no/such/file.avsc"], 1, "/no/such/file.avsc: No such file or directory"),
    (["register", "x-value", "-", "--reference", "bad"], 2, "--reference 'bad': want NAME=SUBJECT:VERSION"),
    (["get"], 2, "give a SUBJECT [VERSION] or --id ID"),
])
def test_bad_input_is_one_line(registry, capsys, monkeypatch, argv, status, message):
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO("{}"))
    got, out, err = run(capsys, registry, *argv)
    assert got == status and err.startswith("mmlog: error: ") and message in err and err.count("\n") == 1


def test_an_unreachable_registry_is_one_line(capsys):
    status = cli.main(["schemas", "list", "--registry", "http://127.0.0.1:9"])
    err = capsys.readouterr().err
    assert status == 1 and "schema registry unreachable at http://127.0.0.1:9" in err


def test_the_demo_round_trips_avro_records_through_its_registry(capsys):
    assert cli.main(["demo", "--schemas", "--records", "1000"]) == 0
    out = capsys.readouterr().out
    assert "Avro schema id 1 under demo-payments-value; 10000 Avro records produced" in out
    assert "a changed schema checked against it: incompatible" in out and "broker stopped cleanly" in out
