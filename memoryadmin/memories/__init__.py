"""Memories: the browser (pin, edit, delete), imports and exports (JSONL, LoCoMo; uploads on the
worker) and forget requests (the reviewed erasure and its tombstone)."""
