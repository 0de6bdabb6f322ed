"""Durable files: atomic JSON state and append-only JSONL traces."""

from autocad_bench.storage.atomic import atomic_write_bytes, atomic_write_json, read_json
from autocad_bench.storage.jsonl import append_jsonl, read_jsonl

__all__ = ["append_jsonl", "atomic_write_bytes", "atomic_write_json", "read_json", "read_jsonl"]
