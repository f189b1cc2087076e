"""The storage engine: segments, shared mmap indexes and partition state, partition logs."""

from mmlog.log.append_info import AppendInfo
from mmlog.log.partition import Partition
from mmlog.log.segment import FileSlice
from mmlog.log.segment_view import LogRead

__all__ = ["AppendInfo", "FileSlice", "LogRead", "Partition"]
