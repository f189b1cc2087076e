"""Listener settings: names, protocols, advertised addresses, the inter-broker listener, and the
combinations a broker refuses at start."""

from __future__ import annotations

import pytest

from mmlog.config.broker import BrokerConfig, Listener
from mmlog.config.settings import ConfigError
from mmlog.ipc.cluster_view import Endpoint


def load(**values) -> BrokerConfig:
    return BrokerConfig.load(None, {k.replace("_", "."): v for k, v in values.items()})


def test_named_listeners_take_their_protocol_from_the_map():
    config = load(listeners="PLAINTEXT://127.0.0.1:9092,CLIENT://0.0.0.0:9093,REPLICATION://10.0.0.5:9094",
                  listener_security_protocol_map="PLAINTEXT:PLAINTEXT,CLIENT:SASL_SSL,REPLICATION:SSL",
                  advertised_listeners="CLIENT://broker1.example.com:9093", inter_broker_listener_name="replication",
                  ssl_keystore_location="/k.pem", sasl_enabled_mechanisms="SCRAM-SHA-512")
    assert config.listeners == [Listener("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092),
                                Listener("CLIENT", "SASL_SSL", "0.0.0.0", 9093),
                                Listener("REPLICATION", "SSL", "10.0.0.5", 9094)]
    assert [(a.name, a.host, a.port) for a in config.advertised_listeners] == [
        ("PLAINTEXT", "127.0.0.1", 9092), ("CLIENT", "broker1.example.com", 9093), ("REPLICATION", "10.0.0.5", 9094)]
    assert config.inter_broker_listener.name == "REPLICATION"
    me = Endpoint.of(config)
    assert me.address("CLIENT") == ("broker1.example.com", 9093) and me.address("NOPE") == ("127.0.0.1", 9092)


def test_a_bare_address_is_plaintext_and_the_first_listener_is_the_inter_broker_one():
    config = load(listeners="127.0.0.1:9092")
    assert config.listeners == [Listener("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092)]
    assert config.inter_broker_listener.name == "PLAINTEXT" and config.advertised == ("127.0.0.1", 9092)


def test_ports_bound_at_zero_are_advertised_as_bound():
    config = load(listeners="PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", ssl_keystore_location="/k.pem")
    bound = config.with_ports([4001, 4002])
    assert [(a.name, a.port) for a in bound.advertised_listeners] == [("PLAINTEXT", 4001), ("SSL", 4002)]


@pytest.mark.parametrize("values, message", [
    ({"listeners": "FOO://127.0.0.1:9092"}, "listeners"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092,PLAINTEXT://127.0.0.1:9093"}, "listeners"),
    ({"listeners": "SSL://127.0.0.1:9093"}, "ssl.keystore.location"),
    ({"inter.broker.listener.name": "INTERNAL"}, "inter.broker.listener.name"),
    ({"advertised.listeners": "SSL://h:1"}, "advertised.listeners"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:9093"}, "sasl.jaas.config"),
    ({"sasl.enabled.mechanisms": "GSSAPI"}, "sasl.enabled.mechanisms"),
    ({"ssl.keystore.type": "JKS"}, "ssl.keystore.type"),
    ({"ssl.client.auth": "always"}, "ssl.client.auth"),
    ({"listener.security.protocol.map": "A:TLS"}, "listener.security.protocol.map"),
])
def test_what_cannot_work_stops_the_broker_at_start_naming_the_setting(values, message):
    with pytest.raises(ConfigError, match=message):
        BrokerConfig.load(None, values)


def test_a_listener_may_override_its_tls_and_sasl_settings():
    config = BrokerConfig.load(None, {
        "listeners": "SSL://127.0.0.1:1,MTLS://127.0.0.1:2,SASL_PLAINTEXT://127.0.0.1:3",
        "listener.security.protocol.map": "SSL:SSL,MTLS:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "ssl.keystore.location": "/k.pem", "sasl.jaas.config": 'x username="a" password="b";',
        "listener.name.mtls.ssl.client.auth": "required", "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN"})
    assert config.for_listener("MTLS", "ssl.client.auth") == "required"
    assert config.for_listener("SSL", "ssl.client.auth") == "none"
    assert config.for_listener("SASL_PLAINTEXT", "sasl.enabled.mechanisms") == "PLAIN"


@pytest.mark.parametrize("name, message", [("listener.name.nope.ssl.client.auth", "not in listeners"),
                                           ("listener.name.plaintext.log.dirs", "unknown setting"),
                                           ("listener.name.plaintext.ssl.client.auth", "invalid")])
def test_listener_overrides_mmlog_cannot_honour_are_refused(name, message):
    with pytest.raises(ConfigError, match=message):
        BrokerConfig.load(None, {name: "always" if name.endswith("auth") and "plaintext" in name else "required"})


def test_passwords_are_sensitive_under_any_listener():
    from mmlog.config.broker import is_sensitive

    assert is_sensitive("ssl.key.password") and is_sensitive("listener.name.mtls.ssl.key.password")
    assert is_sensitive("sasl.jaas.config") and not is_sensitive("ssl.keystore.location")
