"""The offline writer: a cluster's most central sentences under a length budget.

Centroid-based extractive summarisation (MEAD, Radev et al. 2004: a sentence scores by how close
it is to the cluster's centroid). Here a sentence's score is the sum of two terms in [0, 1]:

- the cosine of its memory's embedding to the cluster's mean embedding (the memory's centrality;
  sentences have no embeddings of their own and none are computed, so no embedder is needed);
- the mean, over its content tokens (:func:`consolidation.text.content_tokens`, every script),
  of the fraction of the cluster's memories that contain the token (the word centroid).

Sentences are taken best first while they fit in ``max_chars`` (one that does not fit is
skipped, a shorter one may still fit); a sentence whose content tokens are all in sentences
already taken adds nothing and is skipped. The chosen sentences are written in the children's
order (chronological), each citing the memory it was taken from, verbatim: an extractive
summary states nothing its children do not.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..records import MemoryRecord
from ..text import content_tokens, split_sentences

__all__ = ["EXTRACTIVE", "Draft", "extractive_summary"]

EXTRACTIVE = "extractive"
"""``Draft.writer`` (and the summary's ``summary_writer``) of the extractive writer."""


@dataclass(frozen=True)
class Draft:
    """A summary text as sentences with their citations.

    ``sentences``: the text's sentences, in order; ``citations``: per sentence, the child ids it
    rests on (non-empty, each among the children); ``writer``: ``"extractive"`` or the model
    name; ``tokens``: for an LLM draft, ``prompt`` and ``completion`` token counts (estimated,
    :func:`consolidation.pyramid.abstractive.estimate_tokens`).
    """

    sentences: tuple[str, ...]
    citations: tuple[tuple[str, ...], ...]
    writer: str
    tokens: dict[str, int] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The summary's text: the sentences joined by single spaces."""
        return " ".join(self.sentences)

    @property
    def cited(self) -> list[str]:
        """Every child id cited, in first-cited order."""
        return list(dict.fromkeys(c for cites in self.citations for c in cites))


def _unit(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms > 0, norms, 1.0)


def extractive_summary(
    children: Sequence[MemoryRecord], max_chars: int, *, min_cited: int = 2
) -> Draft | None:
    """The extractive :class:`Draft` of ``children`` (records with embeddings, in the order the
    sentences should appear), at most ``max_chars`` characters (sentences joined by one space).

    Returns ``None`` when fewer than ``min_cited`` children would be cited (every sentence of the
    others too long for the budget, or adding nothing): a "summary" quoting one memory is a copy.
    Raises ``ValueError`` when a child has no embedding or ``max_chars < 1``.
    """
    if max_chars < 1:
        raise ValueError(f"max_chars must be >= 1, got {max_chars!r}")
    if any(c.embedding is None for c in children):
        raise ValueError("every child needs an embedding for an extractive summary")
    if not children:
        return None
    embs = [c.embedding for c in children if c.embedding is not None]  # all: checked above
    emb = _unit(np.stack(embs).astype(np.float32))
    centroid = emb.mean(axis=0)
    norm = float(np.linalg.norm(centroid))
    central = emb @ (centroid / norm) if norm > 0 else np.zeros(len(children), np.float32)
    per_child = [split_sentences(c.document) for c in children]
    child_tokens = [
        {t for s in sents for t in content_tokens(s)} for sents in per_child
    ]  # document frequency counts each child once
    df = Counter(t for toks in child_tokens for t in toks)
    n = len(children)
    candidates: list[tuple[float, int, int, str, frozenset[str]]] = []
    for ci, sents in enumerate(per_child):
        for si, sent in enumerate(sents):
            toks = frozenset(content_tokens(sent))
            if not toks or len(sent) > max_chars:
                continue
            word = sum(df[t] for t in toks) / (len(toks) * n)
            candidates.append((-(float(central[ci]) + word), ci, si, sent, toks))
    candidates.sort(key=lambda c: (c[0], c[1], c[2]))
    chosen: list[tuple[int, int, str]] = []
    covered: set[str] = set()
    used = 0
    for _, ci, si, sent, toks in candidates:
        if toks <= covered:
            continue
        extra = len(sent) + (1 if chosen else 0)
        if used + extra > max_chars:
            continue
        chosen.append((ci, si, sent))
        covered |= toks
        used += extra
    if len({ci for ci, _, _ in chosen}) < min_cited:
        return None
    chosen.sort()
    return Draft(
        sentences=tuple(s for _, _, s in chosen),
        citations=tuple((children[ci].id,) for ci, _, _ in chosen),
        writer=EXTRACTIVE,
    )
