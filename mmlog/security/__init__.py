"""Security building blocks below both the broker and the clients: SCRAM and PLAIN (sans-IO), the
credential store's file, TLS contexts from PEM files. Nothing here opens a socket."""
