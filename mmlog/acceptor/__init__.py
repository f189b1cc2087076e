"""The acceptor process (the broker's main process): it binds the listeners, accepts connections and hands
each to a processor, supervises the processors, the cleaner and the replica fetcher, and serves their
control-channel requests through the control plane (groups, transactions, the metadata store)."""
