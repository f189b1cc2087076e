"""Kafka's four security protocols, by name: what a broker's listener speaks (`listeners`,
`listener.security.protocol.map`) and what a client asks for (`security.protocol`).

Both sides' settings name them, so they live here rather than with either side's configuration."""

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})  # those that encrypt
SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})  # those that authenticate with SASL
