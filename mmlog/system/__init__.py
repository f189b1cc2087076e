"""What every part of the broker needs beneath it: files replaced durably, a process's name, a worker
thread's queue, the compact JSON of ZooKeeper's nodes. Below everything else: it imports nothing of mmlog."""
