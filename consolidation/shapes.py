"""Recognise how an existing collection was written and choose the :class:`FieldMap` to read it.

Agents' memory libraries write Chroma collections in their own shapes (payloads read from the
libraries' source; ``tests/agent_stores.py`` writes them through the libraries' own code):

- ``mem0`` (mem0ai 2.2.1, ``mem0/memory/main.py::Memory._create_memory``): **no document**; the
  text is metadata ``data``, with ``hash`` (md5 of the text), ``created_at``/``updated_at``
  (ISO 8601), ``text_lemmatized``, ``role`` and the session ids ``user_id``/``agent_id``/
  ``run_id`` (``actor_id`` for named chat participants); Chroma's default ``l2`` space;
  vectors from mem0's embedder (OpenAI ``text-embedding-3-small``, 1536-d, by default).
- ``praisonai`` (praisonaiagents 1.7.17, ``memory/memory.py::Memory.store_long_term``): the text
  is the document; metadata from the caller (``Task.store_in_memory``: ``agent_name``,
  ``task_id``, ``timestamp`` in epoch seconds; quality scores ``quality``, ``completeness``…;
  ``trust``/``origin``); ``cosine`` space; ids are ``time.time_ns()`` strings; OpenAI vectors.
- ``plain``: documents with little or no metadata (a log written with ``collection.add``).
- ``memoryadmin``: what this project writes (documents; ``created_at``, ``importance``,
  ``tier``, ``session``, ``evidence``… metadata; all-MiniLM-L6-v2 384-d vectors, cosine).

:func:`detect_shape` is pure: it reads a :class:`CollectionSample` (taken by the console from
the first records of the collection) and, when given an ``embed`` callable, compares our
embeddings of a few sample texts with the stored vectors to say whether our embedder is the
collection's own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from .records import EMBEDDING_DIM, FieldMap

__all__ = [
    "MATCH_COSINE",
    "PRESETS",
    "SHAPES",
    "CollectionSample",
    "ShapeReport",
    "detect_shape",
    "preset_field_map",
]

SHAPES = ("mem0", "praisonai", "plain", "memoryadmin")
"""Shapes :func:`detect_shape` recognises."""

PRESETS = ("auto", "mem0", "praisonai", "plain")
"""Presets an operator may choose when attaching (``auto`` detects the shape)."""

MATCH_COSINE = 0.99
"""Our embedding of a sample text must be at least this close (cosine) to the stored vector for
our embedder to count as the collection's own. Our offline all-MiniLM-L6-v2 reproduces Chroma's
stock vectors at cosine >= 0.999 (``tests/consolidation/test_embedder.py``); any other model's
384-d vectors are unrelated to ours (cosine near 0), so 0.99 separates the two with margin."""

_SAMPLE_TEXTS = 8  # texts embedded to compare with the stored vectors (cheap: ~30 ms)
_MEM0_KEYS = frozenset({"data", "hash"})
_PRAISON_KEYS = frozenset(
    {
        "agent_name",
        "task_id",
        "timestamp",
        "quality",
        "completeness",
        "relevance",
        "clarity",
        "accuracy",
        "trust",
        "origin",
    }
)
_OUR_KEYS = frozenset(
    {
        "importance",
        "tier",
        "pinned",
        "session",
        "evidence",
        "merged_from",
        "layer",
        "speaker",
        "supersedes",
        "access_count",
        "last_accessed_at",
    }
)
# Metadata keys other tools keep their text in when they write no document (LangChain's
# ``page_content``, LlamaIndex-style ``text``, generic ``content``/``memory``).
_TEXT_KEYS = ("data", "text", "content", "memory", "page_content")

_MEM0_SCOPE = ("user_id", "agent_id", "run_id", "actor_id")


def preset_field_map(shape: str) -> FieldMap:
    """The field map of a known shape (one of :data:`SHAPES`); ``ValueError`` otherwise."""
    if shape == "mem0":
        # A mem0 ``run_id`` is one conversation: the session distillation groups by.
        return FieldMap(
            document="data",
            created_at="created_at",
            updated_at="updated_at",
            session="run_id",
            scope=_MEM0_SCOPE,
            text_hash="hash",
            text_copies=("text_lemmatized",),
        )
    if shape == "praisonai":
        # PraisonAI stamps the write time as epoch seconds in ``timestamp``; it has no
        # updated_at. Memories of different agents of a team stay apart (``agent_name``).
        return FieldMap(created_at="timestamp", scope=("user_id", "agent_name", *_MEM0_SCOPE[1:]))
    if shape in ("plain", "memoryadmin"):
        return FieldMap()
    raise ValueError(f"unknown shape {shape!r}: choose one of {', '.join(SHAPES)}")


@dataclass(frozen=True)
class CollectionSample:
    """The first records of a collection and what Chroma says about it.

    ``documents[i]`` is ``None`` where the record has no document; ``vectors`` holds the stored
    vectors of the sampled records (``(n, width)`` lists of floats), possibly empty;
    ``vector_width`` the width of stored vectors (``None`` for an empty collection); ``space``
    the HNSW distance space (``"l2"``, ``"cosine"``, ``"ip"``) or ``None`` when unknown;
    ``embedding_function`` the name of the collection's configured function (``"default"`` is
    Chroma's all-MiniLM-L6-v2) or ``None``; ``count`` the collection's record count.
    """

    ids: Sequence[str]
    documents: Sequence[str | None]
    metadatas: Sequence[Mapping[str, Any] | None]
    vectors: Sequence[Sequence[float]] = ()
    vector_width: int | None = None
    space: str | None = None
    embedding_function: str | None = None
    count: int = 0


@dataclass(frozen=True)
class ShapeReport:
    """What :func:`detect_shape` decided.

    ``shape`` is one of :data:`SHAPES`; ``field_map`` the map to store on the agent;
    ``embedder_matches`` is ``True`` when our all-MiniLM-L6-v2 embedder produces the stored
    vectors (new texts can then be embedded for the collection), ``False`` when it does not
    (other width or model), ``None`` when it could not be checked; ``notes`` are sentences
    for the operator.
    """

    shape: str
    field_map: FieldMap
    vector_width: int | None
    space: str | None
    embedder_matches: bool | None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (the field map as :meth:`FieldMap.to_dict`)."""
        return {
            "shape": self.shape,
            "field_map": self.field_map.to_dict(),
            "vector_width": self.vector_width,
            "space": self.space,
            "embedder_matches": self.embedder_matches,
            "notes": list(self.notes),
        }


def _share(metas: Sequence[Mapping[str, Any]], test: Callable[[Mapping[str, Any]], bool]) -> float:
    return sum(1 for m in metas if test(m)) / len(metas) if metas else 0.0


def _holds_text(key: str, meta: Mapping[str, Any]) -> bool:
    value = meta.get(key)
    return isinstance(value, str) and bool(value.strip())


def _text_key(metas: Sequence[Mapping[str, Any]]) -> str | None:
    """The metadata key holding a non-empty string in at least 90 % of the records."""
    for key in _TEXT_KEYS:
        if _share(metas, partial(_holds_text, key)) >= 0.9:
            return key
    return None


def _guess(sample: CollectionSample) -> tuple[str, str | None]:
    """``(shape, text key)`` from the sampled records (text key ``None`` = the document)."""
    if not sample.ids:
        return "memoryadmin", None  # nothing to read: we will be its writer
    metas = [dict(m or {}) for m in sample.metadatas]
    has_doc = _share(
        [{"d": d} for d in sample.documents], lambda r: isinstance(r["d"], str) and bool(r["d"])
    )
    if _share(metas, lambda m: set(m) >= _MEM0_KEYS and isinstance(m.get("data"), str)) >= 0.9:
        return "mem0", "data"
    if has_doc < 0.5:
        return "plain", _text_key(metas)
    if _share(metas, lambda m: bool(_OUR_KEYS & set(m))) >= 0.5:
        return "memoryadmin", None
    numeric_ids = _share([{"i": i} for i in sample.ids], lambda r: r["i"].isdigit())
    if _share(metas, lambda m: bool(_PRAISON_KEYS & set(m))) >= 0.5 or (
        numeric_ids >= 0.9 and _share(metas, lambda m: "timestamp" in m) >= 0.5
    ):
        return "praisonai", None
    return "plain", None


def _check_preset(shape: str, sample: CollectionSample) -> None:
    """Refuse a preset the sampled records plainly contradict (its text would be missing)."""
    if not sample.ids:
        return
    metas = [dict(m or {}) for m in sample.metadatas]
    if shape == "mem0":
        share = _share(metas, lambda m: isinstance(m.get("data"), str))
        if share < 0.5:
            raise ValueError(
                "the collection does not look like mem0: its records have no metadata 'data' "
                "holding the text; try --preset auto"
            )
        return
    has_doc = _share(
        [{"d": d} for d in sample.documents], lambda r: isinstance(r["d"], str) and bool(r["d"])
    )
    if has_doc < 0.5:
        raise ValueError(
            f"the collection does not look like {shape}: most records have no document "
            "(the text is elsewhere); try --preset auto"
        )


def _embedder_matches(
    sample: CollectionSample, texts: Sequence[str], embed: Callable[[list[str]], Any] | None
) -> tuple[bool | None, str]:
    width = sample.vector_width
    if width is None:
        return None, "The collection is empty: vectors will be all-MiniLM-L6-v2 (384-d)."
    if width != EMBEDDING_DIM:
        return False, (
            f"Stored vectors are {width}-d, not all-MiniLM-L6-v2 (384-d): planning embeds the "
            "text with ours; a new text is written only when the agent has an embedder for "
            "this collection."
        )
    pairs = [
        (t, v) for t, v in zip(texts, sample.vectors, strict=False) if t.strip() and v is not None
    ][:_SAMPLE_TEXTS]
    if embed is None or not pairs:
        if sample.embedding_function == "default":
            return True, "The collection's embedding function is Chroma's all-MiniLM-L6-v2."
        return None, "Stored vectors are 384-d; whether they are all-MiniLM-L6-v2 was not checked."
    ours = np.asarray(embed([t for t, _ in pairs]), dtype=np.float64)
    theirs = np.asarray([v for _, v in pairs], dtype=np.float64)
    norms = np.linalg.norm(ours, axis=1) * np.linalg.norm(theirs, axis=1)
    cos = np.einsum("ij,ij->i", ours, theirs) / np.where(norms > 0, norms, 1.0)
    low = float(cos.min())
    if low >= MATCH_COSINE:
        return True, f"Stored vectors are all-MiniLM-L6-v2 (384-d; cosine >= {low:.3f} to ours)."
    return False, (
        f"Stored vectors are 384-d but another model's (cosine {low:.2f} to ours on "
        f"{len(pairs)} samples): new texts need the agent's embedder."
    )


def detect_shape(
    sample: CollectionSample,
    *,
    preset: str = "auto",
    embed: Callable[[list[str]], Any] | None = None,
) -> ShapeReport:
    """Choose the shape and field map of a collection from a sample of its records.

    ``preset`` is one of :data:`PRESETS`: ``auto`` detects the shape (mem0 when ≥ 90 % of the
    records carry metadata ``data`` and ``hash``; praisonai when most have a document and
    PraisonAI's metadata keys; memoryadmin when most carry our keys; otherwise plain, reading
    the text from a metadata key such as ``text``/``content`` when there is no document). A
    named preset is used as given, after checking the records hold their text where the preset
    says. ``embed`` (``list[str] -> (n, 384)``) lets the report say whether our embedder
    produces the stored vectors (:data:`MATCH_COSINE`).

    Raises ``ValueError`` for an unknown preset, a preset the records contradict, or records
    whose text cannot be found (no document and no text-like metadata key).
    """
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}: choose one of {', '.join(PRESETS)}")
    notes: list[str] = []
    if preset == "auto":
        shape, text_key = _guess(sample)
        if not sample.ids:
            notes.append("The collection is empty: memoryadmin's own field map is used.")
        else:
            notes.append(f"Detected a {shape} collection from {len(sample.ids)} sampled records.")
    else:
        _check_preset(preset, sample)
        shape = preset
        text_key = "data" if preset == "mem0" else None
        notes.append(f"Preset {preset} chosen by the operator.")
    fm = preset_field_map(shape)
    if shape == "plain" and text_key is None and sample.ids:
        has_doc = any(isinstance(d, str) and d.strip() for d in sample.documents)
        if not has_doc:
            raise ValueError(
                "no memory text found: the records have no document and no metadata key "
                f"among {', '.join(_TEXT_KEYS)} holds text"
            )
    if shape == "plain" and text_key:
        fm = FieldMap(document=text_key)
        notes.append(f"The records have no document; the text is metadata {text_key!r}.")
    metas = [dict(m or {}) for m in sample.metadatas]
    texts = [
        str(m.get(fm.document) or "") if fm.document else (d or "")
        for d, m in zip(sample.documents, metas, strict=False)
    ]
    present = sorted({k for k in fm.scope if any(m.get(k) not in (None, "") for m in metas)})
    if present:
        notes.append("Memories are kept apart by " + ", ".join(present) + ".")
    matches, why = _embedder_matches(sample, texts, embed)
    notes.append(why)
    if sample.space:
        notes.append(f"Distance space {sample.space}; it is kept as the collection has it.")
    return ShapeReport(
        shape=shape,
        field_map=fm,
        vector_width=sample.vector_width,
        space=sample.space,
        embedder_matches=matches,
        notes=tuple(notes),
    )
