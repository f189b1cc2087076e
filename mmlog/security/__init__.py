"""Security, end to end: SCRAM and PLAIN (sans-IO), TLS contexts from PEM files, the credential store and
users, ACLs (the model and its decisions, the processors' authoriser cache, changes, and their nodes in
ZooKeeper), and the client side of a secured connection. Below both the broker and the clients."""
