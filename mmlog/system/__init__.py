"""What every part of the broker needs of the operating system: files replaced durably, a process's
name, a worker thread's queue. Below everything else: it imports nothing of mmlog."""
