"""The control plane: the broker's main process (acceptor, supervisor, coordinators)."""
