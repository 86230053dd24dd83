"""JSONL memory files: strict validation for import, and the writer for export (pure).

Format: UTF-8, one JSON object per line::

    {"id": "m1", "document": "Alice prefers tea",
     "metadata": {"speaker": "Alice"}, "embedding": [...]}

- ``id``: non-empty string of at most :data:`MAX_ID_CHARS` characters, unique in the file;
- ``document``: non-empty (not only whitespace) string of at most :data:`MAX_DOCUMENT_CHARS`;
- ``metadata`` (optional, default ``{}``): an object whose values are JSON values;
- ``embedding`` (optional): a list of exactly 384 finite numbers (all-MiniLM-L6-v2 width); when
  absent the importer computes it.

Blank lines are ignored. Any other key is an error (a typo such as ``"documnet"`` would otherwise
import empty memories). Every error carries its 1-based line number; validation continues past
errors so one run reads the whole file: it lists the first :data:`MAX_ERRORS` and counts them all
(:class:`LineErrors`).

Everything a store would refuse half-way through a write is caught here, before the first write:
strings that are not valid Unicode (a lone surrogate such as ``"\\ud800"`` in the id, the
document, a metadata key or value), metadata keys Chroma reserves, values nested deeper than
:data:`MAX_DEPTH`, integers longer than Python parses (4,300 digits) and embedding values that
overflow float32.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from numbers import Real
from pathlib import Path
from typing import IO, Any

import numpy as np

from .records import EMBEDDING_DIM, MAX_DOCUMENT_CHARS, FieldMap, MemoryRecord, metadata_key_problem

__all__ = [
    "MAX_DEPTH",
    "MAX_DOCUMENT_CHARS",
    "MAX_ERRORS",
    "MAX_ID_CHARS",
    "LineError",
    "LineErrors",
    "read_jsonl",
    "record_to_dict",
    "write_jsonl",
]


MAX_ID_CHARS = 512
"""Longest accepted id (characters); matches the console's ``memory_id`` columns."""

MAX_ERRORS = 1000
"""Validation keeps this many errors (the first ones) and only counts the rest: a file of a
million bad lines costs no more memory than one of a thousand, and every line is still read."""

MAX_DEPTH = 32
"""Deepest nesting of lists/objects accepted in a line (the line object itself is depth 1).
Memory metadata is flat in practice; 32 is far beyond any real use and far below the depth at
which Python's parser runs out of stack (~1,000)."""

FLOAT32_MAX = float(np.finfo(np.float32).max)
"""Largest embedding value (≈3.4e38): beyond it a float32 embedding would hold ±inf."""

_FIELDS = {"id", "document", "metadata", "embedding"}
_NOT_STRUCTURE = re.compile(r'"(?:[^"\\]|\\.)*"|[^\[\]{}"]+')
"""Strings and everything but brackets: what :func:`_depth` skips."""


@dataclass(frozen=True)
class LineError:
    """A problem with one line of a JSONL file (``line`` is 1-based)."""

    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


class LineErrors(list[LineError]):
    """The first :data:`MAX_ERRORS` line errors of a file, in order; ``total`` counts them all
    (``total >= len(self)``)."""

    def __init__(self, items: Iterable[LineError] = (), total: int | None = None) -> None:
        super().__init__(items)
        self.total = len(self) if total is None else total

    def add(self, error: LineError) -> None:
        """Count ``error``; keep it while fewer than :data:`MAX_ERRORS` are kept."""
        self.total += 1
        if len(self) < MAX_ERRORS:
            self.append(error)


def _depth(text: str) -> int:
    """Deepest list/object nesting of a JSON text (brackets inside strings do not count)."""
    deepest = level = 0
    for ch in _NOT_STRUCTURE.sub("", text):
        level += 1 if ch in "[{" else -1
        deepest = max(deepest, level)
    return deepest


def _surrogate(value: str) -> str | None:
    """``"\\ud800 at character 5"`` when ``value`` holds a lone surrogate, else ``None``."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"\\u{ord(value[exc.start]):04x} at character {exc.start + 1}"
    return None


def _text_problem(obj: dict[str, Any]) -> str | None:
    """The first string of a line (id, document, metadata key or value) that is not valid
    Unicode or holds a NUL character (U+0000: PostgreSQL's text and jsonb cannot store it, so
    such a memory could never be archived; the edit form refuses it too), named by where."""
    for name in ("id", "document"):
        if isinstance(obj.get(name), str) and (where := _surrogate(obj[name])):
            return f"{name!r} holds a lone surrogate {where}: not valid Unicode"
        if isinstance(obj.get(name), str) and "\x00" in obj[name]:
            col = obj[name].index("\x00") + 1
            return f"{name!r} holds a NUL character (\\u0000) at character {col}: not allowed"
    stack: list[tuple[str, Any]] = [("'metadata'", obj.get("metadata"))]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str) and (where := _surrogate(value)):
            return f"{path} holds a lone surrogate {where}: not valid Unicode"
        if isinstance(value, str) and "\x00" in value:
            return f"{path} holds a NUL character (\\u0000): not allowed"
        if isinstance(value, list):
            stack.extend((f"{path}[{i}]", v) for i, v in enumerate(value))
        elif isinstance(value, dict):
            for k, v in value.items():
                if where := _surrogate(k):
                    return f"{path} has a key with a lone surrogate {where}: not valid Unicode"
                if "\x00" in k:
                    return f"{path} has a key with a NUL character (\\u0000): not allowed"
                stack.append((f"{path}[{k!r}]", v))
    return None


def _parse(text: str) -> tuple[Any, str | None]:
    """``json.loads`` that never raises: ``(value, None)`` or ``(None, problem)``."""
    if text.count("[") + text.count("{") > MAX_DEPTH and _depth(text) > MAX_DEPTH:
        return None, f"nested deeper than {MAX_DEPTH} levels"
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON ({exc.msg} at column {exc.colno})"
    except RecursionError:  # unreachable after the depth check; kept as the last guard
        return None, f"nested deeper than {MAX_DEPTH} levels"
    except ValueError as exc:  # an integer over sys.get_int_max_str_digits() (4,300) digits
        return None, f"invalid JSON ({str(exc).split(':')[0].lower()})"


def _is_json_value(v: Any, depth: int = 0) -> bool:
    if depth > MAX_DEPTH:
        return False
    if v is None or isinstance(v, str | bool | int):
        return True
    if isinstance(v, float):
        return math.isfinite(v)
    if isinstance(v, list):
        return all(_is_json_value(x, depth + 1) for x in v)
    if isinstance(v, dict):
        return all(isinstance(k, str) and _is_json_value(x, depth + 1) for k, x in v.items())
    return False


def _validate(obj: Any) -> str | None:
    if not isinstance(obj, dict):
        return f"expected a JSON object, got {type(obj).__name__}"
    unknown = sorted(set(obj) - _FIELDS)
    if unknown:
        names = ", ".join(map(repr, unknown))
        return f"unknown field(s) {names} (allowed: id, document, metadata, embedding)"
    mid = obj.get("id")
    if not isinstance(mid, str) or not mid.strip():
        return "'id' must be a non-empty string"
    if len(mid) > MAX_ID_CHARS:
        return f"'id' is {len(mid):,} characters long (maximum {MAX_ID_CHARS:,})"
    doc = obj.get("document")
    if not isinstance(doc, str):
        if doc is None:
            return "'document' is missing" if "document" not in obj else "'document' is null"
        return f"'document' must be a string, got {type(doc).__name__}"
    if not doc.strip():
        return "'document' is empty"
    if len(doc) > MAX_DOCUMENT_CHARS:
        return f"'document' is {len(doc):,} characters long (maximum {MAX_DOCUMENT_CHARS:,})"
    meta = obj.get("metadata", {})
    if not isinstance(meta, dict):
        return f"'metadata' must be an object, got {type(meta).__name__}"
    for key in meta:
        if problem := metadata_key_problem(key):
            return problem
    if not _is_json_value(meta):
        return "'metadata' holds a value that is not plain JSON"
    if "embedding" in obj:
        emb = obj["embedding"]
        if not isinstance(emb, list):
            return (
                f"'embedding' must be a list of {EMBEDDING_DIM} numbers, got {type(emb).__name__}"
            )
        if len(emb) != EMBEDDING_DIM:
            return f"'embedding' has {len(emb)} numbers (expected {EMBEDDING_DIM})"
        for x in emb:
            if isinstance(x, bool) or not isinstance(x, Real) or not _finite32(x):
                shown = repr(x) if len(repr(x)) <= 40 else repr(x)[:37] + "…"
                return f"'embedding' holds {shown}: every value must be a finite float32 number"
    return _text_problem(obj)


def _finite32(x: Real) -> bool:
    try:
        return math.isfinite(x) and abs(float(x)) <= FLOAT32_MAX
    except OverflowError:  # an int too large for a float
        return False


def _lines(source: bytes | str | Path | IO[bytes]) -> Iterator[bytes]:
    if isinstance(source, bytes | bytearray):
        yield from bytes(source).split(b"\n")
    elif isinstance(source, str | Path):
        with open(source, "rb") as fh:
            yield from fh
    else:
        # Binary file objects (open(..., "rb"), Django's UploadedFile) iterate by line.
        for chunk in source:
            if isinstance(chunk, str):
                raise TypeError("open the JSONL file in binary mode ('rb')")
            yield chunk


def read_jsonl(
    source: bytes | str | Path | IO[bytes],
    field_map: FieldMap | None = None,
) -> tuple[list[MemoryRecord], LineErrors]:
    """Validate a JSONL memory file → ``(valid records, errors)``.

    ``source`` is the file's bytes, a path, or a binary file object (read line by line, so large
    files stream). Each record's ``embedding`` is ``(384,) float32`` or ``None``. Detected, each
    with its line number: bytes that are not UTF-8, invalid/truncated JSON, a non-object line,
    unknown fields, wrong types, empty or over-long ids/documents, non-finite or wrongly sized
    embeddings, strings that are not valid Unicode (lone surrogates), reserved metadata keys,
    nesting deeper than :data:`MAX_DEPTH`, over-long integers, and duplicate ids (the second
    occurrence is the error). Every line is read: the errors are the first :data:`MAX_ERRORS`,
    ``errors.total`` the count of invalid lines. Never raises for bad content (a line that a
    store would refuse is an error here, so a clean result writes whole); ``OSError``
    propagates when a path cannot be read. ``field_map`` (default :class:`FieldMap`'s keys): the
    metadata keys whose formats are checked (:meth:`FieldMap.format_problems`: times, importance
    in [0, 1], pinned true/false); a line breaking one is an error naming the key.
    """
    field_map = field_map or FieldMap()
    records: list[MemoryRecord] = []
    errors = LineErrors()
    first_seen: dict[str, int] = {}
    for n, raw in enumerate(_lines(source), start=1):
        if n == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]  # a UTF-8 byte order mark (Windows editors write one): not content
        try:
            text = raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError as exc:
            errors.add(
                LineError(n, f"not UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})")
            )
            continue
        if not text.strip():
            continue
        obj, problem = _parse(text)
        if problem:
            errors.add(LineError(n, problem))
            continue
        problem = _validate(obj)
        if problem:
            errors.add(LineError(n, problem))
            continue
        bad = field_map.format_problems(obj.get("metadata") or {})
        if bad:
            errors.add(LineError(n, "; ".join(bad)))
            continue
        mid = obj["id"]
        if mid in first_seen:
            errors.add(LineError(n, f"duplicate id {mid!r} (first on line {first_seen[mid]})"))
            continue
        first_seen[mid] = n
        emb = obj.get("embedding")
        records.append(
            MemoryRecord(
                mid,
                obj["document"],
                None if emb is None else np.asarray(emb, dtype=np.float32),
                obj.get("metadata") or {},
            )
        )
    return records, errors


def record_to_dict(record: MemoryRecord, *, include_embedding: bool = True) -> dict[str, Any]:
    """One record as the JSONL object (``embedding`` as a list of floats when present)."""
    d: dict[str, Any] = {"id": record.id, "document": record.document, "metadata": record.metadata}
    if include_embedding and record.embedding is not None:
        d["embedding"] = [float(x) for x in np.asarray(record.embedding, dtype=np.float32)]
    return d


def write_jsonl(
    records: Iterable[MemoryRecord], fileobj: IO[str], *, include_embeddings: bool = True
) -> int:
    """Write ``records`` one JSON object per line to a text file object; returns the count.

    Each float32 embedding value is written as its exact float64 value, so the file holds the
    store's embeddings exactly and reading it back gives the same float32 bytes. (Writing them
    into a Chroma ``cosine`` collection may still move a value by 1 ulp: see the adapter.)
    """
    n = 0
    for r in records:
        fileobj.write(
            json.dumps(record_to_dict(r, include_embedding=include_embeddings), ensure_ascii=False)
        )
        fileobj.write("\n")
        n += 1
    return n
