"""The schema registry inside each broker, speaking Confluent Schema Registry's REST API (docs/schemas.md).

`api.mount(server, config)` starts it on the broker's web server (mmlog/web/). Its parts: `records.py`
(the `_schemas` record format), `view.py` (the in-memory registry every broker reads from), `reader.py`
(the thread keeping the view), `writer.py` (the one writer's appends), `operations.py` (what each change
does), `service.py` (where a change is made, forwarding), `reads.py` / `writes.py` (the HTTP handlers),
`access.py` (the ACL each request asks for), `errors.py` (Confluent's error codes).
"""
