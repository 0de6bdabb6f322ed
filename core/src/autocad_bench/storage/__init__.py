"""Durable files: atomic JSON state and append-only JSONL traces."""

from autocad_bench.storage.atomic import (
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_model,
    fsync_directory,
    read_json,
)
from autocad_bench.storage.jsonl import JsonlAppender, append_jsonl, append_jsonl_many, read_jsonl

__all__ = [
    "JsonlAppender",
    "append_jsonl",
    "append_jsonl_many",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_model",
    "fsync_directory",
    "read_json",
    "read_jsonl",
]
