"""The compiled request path: Produce served end to end by numba code, the Python handlers its reference."""
