"""The storage engine: segments, shared mmap indexes and partition state, partition logs."""

from mmlog.log.partition import AppendInfo, LogRead, Partition
from mmlog.log.segment import FileSlice

__all__ = ["AppendInfo", "FileSlice", "LogRead", "Partition"]
