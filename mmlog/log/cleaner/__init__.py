"""The log cleaner: compaction of `cleanup.policy=compact` partitions in a process of its own (manager),
one pass at a time (cleaner), keys hashed into an offset map by numba kernels, segments swapped in crash-safely."""
