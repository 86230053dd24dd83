"""Display segments of a memory an operation removes: which words survive, which are lost.

Pure, from stored rows: :func:`source_segments` cuts a source's text into kept / elsewhere /
changed / lost pieces for the proposal page, :func:`lost_segments` one lost sentence (the
definitions of "lost" are :mod:`.lost`'s).
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass

from .lost import LostSentence, OperationText, SentenceIndex, SourceText, sentences
from .terms import EDGE_PUNCT, WORD, missing_words, word_key

__all__ = ["Segment", "lost_segments", "source_segments"]


@dataclass(frozen=True)
class Segment:
    """A piece of a source's text for display: ``tag`` is ``"kept"`` (verbatim in the result),
    ``"elsewhere"`` (a copy stays in another memory), ``"changed"`` (a word of a lost sentence
    the result still has), ``"lost"`` (a word the result does not have) or ``"space"``."""

    text: str
    tag: str


def source_segments(
    op: OperationText, source: SourceText, *, elsewhere: Container[str] = ()
) -> list[Segment]:
    """``source.document`` cut into :class:`Segment` s whose texts concatenate back to it.

    A source the operation does not remove is one ``"kept"`` segment. ``elsewhere`` is the
    stored :attr:`OperationLoss.elsewhere` (sentence keys).
    """
    doc = source.document
    if not source.removed or op.kind in ("promote", "conflict"):
        return [Segment(doc, "kept")] if doc else []
    ref_text = op.reference
    ref_index = SentenceIndex([ref_text])
    ref_words = [word_key(w) for w in WORD.findall(ref_text)]
    out: list[Segment] = []
    pos = 0

    def emit(text: str, tag: str) -> None:
        if not text:
            return
        if out and out[-1].tag == tag:
            out[-1] = Segment(out[-1].text + text, tag)
        else:
            out.append(Segment(text, tag))

    for s in sentences(doc):
        emit(doc[pos : s.start], "space")
        text = doc[s.start : s.end]
        if s in ref_index:
            emit(text, "kept")
        elif s.key in elsewhere:
            emit(text, "elsewhere")
        else:
            cur = 0
            for a, b, missing in missing_words(text, ref_words):
                emit(text[cur:a], "space")
                emit(text[a:b], "lost" if missing else "changed")
                cur = b
            emit(text[cur:], "space")
        pos = s.end
    emit(doc[pos:], "space")
    return _compact(out)


def _compact(segs: list[Segment]) -> list[Segment]:
    """Join runs of one tag separated by single spaces ("changed", "space", "changed" → one)."""
    out: list[Segment] = []
    for k, seg in enumerate(segs):
        nxt = segs[k + 1] if k + 1 < len(segs) else None
        if (
            seg.tag == "space"
            and out
            and nxt is not None
            and out[-1].tag == nxt.tag
            and nxt.tag in ("changed", "lost")
        ):
            out[-1] = Segment(out[-1].text + seg.text, out[-1].tag)
        elif out and out[-1].tag == seg.tag and seg.tag != "space":
            out[-1] = Segment(out[-1].text + seg.text, seg.tag)
        else:
            out.append(seg)
    return out


def lost_segments(lost: LostSentence) -> list[Segment]:
    """A lost sentence as :class:`Segment` s with its missing words (``lost.words``, found in
    order) tagged ``"lost"`` and the rest ``"changed"``/``"space"``; texts concatenate back."""
    out: list[Segment] = []
    want = list(lost.words)
    pos = 0
    for m in WORD.finditer(lost.text):
        if m.start() > pos:
            out.append(Segment(lost.text[pos : m.start()], "space"))
        word = m.group(0)
        hit = bool(want) and word.strip(EDGE_PUNCT) == want[0]
        if hit:
            want.pop(0)
        out.append(Segment(word, "lost" if hit else "changed"))
        pos = m.end()
    if pos < len(lost.text):
        out.append(Segment(lost.text[pos:], "space"))
    return _compact(out)
