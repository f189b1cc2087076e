"""`mmlog users`: the first user written into a standalone broker's store, then users managed through
the broker with Kafka-style client properties (--command-config)."""

from __future__ import annotations

import subprocess
import sys


def mmlog(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mmlog", *args], input=stdin, capture_output=True, text=True,
                          timeout=60)


def test_the_first_user_goes_into_the_data_dir_and_the_password_is_not_stored(tmp_path):
    out = mmlog("users", "set", "root", "--data-dir", str(tmp_path), "--mechanism", "SCRAM-SHA-256",
                stdin="s3cret\n")
    assert out.returncode == 0, out.stderr
    assert "s3cret" not in (tmp_path / "credentials.json").read_text()
    out = mmlog("users", "describe", "--data-dir", str(tmp_path))
    assert out.stdout.split() == ["root", "SCRAM-SHA-256", "iterations=4096"]


def test_users_are_managed_through_a_sasl_ssl_listener(secure_broker, pki, tmp_path):
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                      "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                      f'username="admin" password="admin-secret";\nssl.truststore.location={pki.ca}\n')
    where = ["--bootstrap", f"127.0.0.1:{secure_broker.listener_ports['SASL_SSL']}", "--command-config", str(config)]
    out = mmlog("users", "set", "dave", "--iterations", "5000", *where, stdin="dave-pw\n")
    assert out.returncode == 0, out.stderr
    out = mmlog("users", "describe", "dave", "alice", *where)
    assert out.returncode == 0, out.stderr
    assert "dave\tSCRAM-SHA-512 iterations=5000" in out.stdout and "alice\t" in out.stdout
    out = mmlog("users", "delete", "dave", *where)
    assert out.returncode == 0, out.stderr
    out = mmlog("users", "describe", "dave", *where)
    assert out.returncode != 0 and "does not exist" in out.stderr


def test_the_other_commands_take_the_same_command_config(secure_broker, pki, tmp_path):
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SSL\n"
                      f"ssl.truststore.location={pki.ca}\nssl.keystore.location={pki.client_cert}\n"
                      f"ssl.key.location={pki.client_key}\n")
    where = ["--bootstrap", f"127.0.0.1:{secure_broker.listener_ports['SSL']}", "--command-config", str(config)]
    assert mmlog("topics", "create", "cli-secure", "--partitions", "1", *where).returncode == 0
    out = mmlog("produce", "cli-secure", *where, stdin="one\ntwo\n")
    assert out.returncode == 0, out.stderr
    out = mmlog("consume", "cli-secure", "--from-beginning", "--max-messages", "2", *where)
    assert out.returncode == 0 and out.stdout.split() == ["one", "two"], out.stderr
    bad = tmp_path / "bad.properties"
    bad.write_text("ssl.keystore.type=JKS\n")
    out = mmlog("topics", "list", "--bootstrap", "127.0.0.1:1", "--command-config", str(bad))
    assert out.returncode != 0 and "PEM" in out.stderr
