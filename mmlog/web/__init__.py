"""The broker's HTTP stack: one aiohttp server in the main process that services mount on (the schema
registry; later /metrics and a console), with HTTP basic authentication against the broker's SASL users
and authorisation by its ACLs."""
