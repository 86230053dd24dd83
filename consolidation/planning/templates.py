"""Template groups: memories whose texts differ only in their numbers, judged once per group.

Logs, imports and tickets write one sentence many times with other numbers in it ("imported
memory 17: the user likes topic 17 and colour 4", "order 3108 shipped to warehouse 4"). Every
pair of such a group is a candidate (their cosine is 0.8–0.98 with all-MiniLM-L6-v2), and
judging each pair cost 30 s for 400 memories. Here the group's pairs are judged once per
*kind* of difference instead:

- The *template* of a text is its normalised text (:func:`consolidation.text.normalize_text`)
  with every run of digits (``\\d+`` with inner ``.``/``,`` groups) replaced by one slot mark;
  a group is the memories of one scope that share a template with at least one slot (two or
  more members). Its *slots* are the numbers in text order.
- A **numbered series**: a group of at least :data:`SERIES_MIN` members, with two or more
  slots, one of which holds a different number in every member. That number names the record
  (an import line, order, ticket, step or row number): two members are two records, never one
  value that changed. Every pair of the group is ``"distinct"`` without a judgment (reason
  given), so none is merged, reconciled or offered as a conflict against another member.
  A template with a single slot ("the user's weight is 80 kg") is not a series: its number is
  the value, and two members are judged (a changed value may be an update).
- Otherwise a pair of the group is classed by the slots it differs in (and the digit counts of
  the two numbers there); the first pair of each class is judged by
  :func:`~consolidation.judgment.judge_pair` at cosine 1.0. A ``"distinct"`` answer holds for
  the whole class (the judgment only turns a pair distinct *more* as the cosine falls, and
  reads the dates only to pick the newer of a pair it already calls supersedes or conflict),
  so the class's other pairs are not judged again. Any other answer is per pair: those pairs
  are judged one by one, as before, within the candidate bound of :mod:`.nearest`.
- Two members with the same numbers have the same normalised text (the class without a
  differing slot): judged once per group, and a ``"same"`` answer (the judgment's first rule,
  whatever the cosine) holds for every such pair of the group.
- A single-number group of at least :data:`SERIES_MIN` members is judged for all its classes
  at once (:func:`_settle`); when every class of different numbers is ``"distinct"`` (and
  equal numbers ``"same"``) the group is *settled* ("the nightly build took 12 minutes":
  readings of an event) and the search skips its pairs like a series' — its equal texts are
  merged by the exact-duplicate channel.

Telemetry (``plan.context["templates"]``): ``groups``, ``members``, ``series`` (groups decided
as numbered series), ``settled`` (single-number groups settled), ``judged`` (class judgments
made), ``answered`` (pair look-ups answered by a group; a pair can be looked up by several
stages).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..judgment import DISTINCT, SAME, PairVerdict, judge_pair
from ..text import normalize_text
from .state import PlanState

__all__ = ["SERIES_MIN", "Templates", "find_templates", "template_of", "template_verdict"]

SERIES_MIN = 3
SETTLE_MAX_CLASSES = 32
"""A single-number group with more classes than this is judged pair by pair (bounded)."""


"""Members a group needs before a number that differs in every one of them is read as a
record number (two members with different numbers may be one value that changed)."""

_DIGITS = re.compile(r"\d+(?:[.,]\d+)*")
_SLOT = "\x00"


def template_of(text: str) -> tuple[str, tuple[str, ...]] | None:
    """``(template, numbers)`` of an already normalised ``text``, or ``None`` without a number.

    >>> template_of("order 31 shipped to warehouse 4")
    ('order \\x00 shipped to warehouse \\x00', ('31', '4'))
    """
    numbers = tuple(_DIGITS.findall(text))
    if not numbers:
        return None
    return _DIGITS.sub(_SLOT, text), numbers


@dataclass
class Templates:
    """The template groups of one pass (module docstring).

    ``group[i]``: row ``i``'s group number (absent: in none); ``numbers[i]``: its numbers;
    ``members[g]``: rows of group ``g`` ascending; ``series[g]``: the slot that numbers the
    records of a numbered series, else ``None``; ``verdicts``: the class judgments made,
    ``{(g, class): PairVerdict}``.
    """

    group: dict[int, int] = field(default_factory=dict)
    numbers: dict[int, tuple[str, ...]] = field(default_factory=dict)
    members: list[list[int]] = field(default_factory=list)
    series: list[int | None] = field(default_factory=list)
    verdicts: dict[tuple[int, tuple[tuple[int, int, int], ...]], PairVerdict] = field(
        default_factory=dict
    )
    answered: int = 0
    series_group: dict[int, int] = field(default_factory=dict)
    """Row → group number, for the members of a numbered series only."""

    def series_labels(self, n: int) -> np.ndarray | None:
        """``(n,) int64``: each member of a numbered series its group number, −1 for every
        other row (the candidate search skips a pair of one label); ``None`` without series."""
        if not self.series_group:
            return None
        out = np.full(n, -1, np.int64)
        for i, g in self.series_group.items():
            out[i] = g
        return out

    def telemetry(self) -> dict[str, int]:
        """``{"groups", "members", "series", "judged", "answered"}`` (module docstring)."""
        return {
            "groups": len(self.members),
            "members": sum(map(len, self.members)),
            "series": sum(s is not None for s in self.series),
            "settled": len(set(self.series_group.values()))
            - sum(s is not None for s in self.series),
            "judged": len(self.verdicts),
            "answered": self.answered,
        }


def _series_slot(numbers: Sequence[tuple[str, ...]]) -> int | None:
    slots = len(numbers[0])
    if len(numbers) < SERIES_MIN or slots < 2:
        return None
    for k in range(slots):
        if len({nums[k] for nums in numbers}) == len(numbers):
            return k
    return None


def find_templates(st: PlanState, *, searched: bool) -> None:
    """Stage ``templates``: the template groups into ``st.templates``.

    A full pass runs it before the candidate search (``searched=False``) over every row: it
    keys each row's normalised text into ``st.keys`` (the ``exact`` stage reuses them) and
    the search skips the pairs of a numbered series (:meth:`Templates.series_labels`). A
    partial incremental pass runs it after the ``exact`` stage (``searched=True``) over the
    new rows and their candidate partners; the other call does nothing."""
    if searched != st.partial:
        return
    rows: Sequence[int] = st.new_and_partners() if st.partial else range(st.n)
    if not st.partial:
        keys: list[str | None] = []
        for doc in st.docs:
            key = normalize_text(doc)
            # the ``exact`` stage's keys: a text that is its own key shares its string
            keys.append((doc if key == doc else key) or None)
        st.keys = keys
    by_key: dict[tuple[tuple[str, ...], str], list[int]] = {}
    numbers: dict[int, tuple[str, ...]] = {}
    keys = st.keys
    for i in rows:
        key = k if keys and (k := keys[i]) is not None else normalize_text(st.docs[i])
        t = template_of(key) if key else None
        if t is None:
            continue
        numbers[i] = t[1]
        by_key.setdefault((st.scopes[i], t[0]), []).append(i)
    tpl = st.templates = Templates()
    for members in by_key.values():
        if len(members) < 2:
            continue
        g = len(tpl.members)
        members.sort()
        tpl.members.append(members)
        tpl.series.append(_series_slot([numbers[i] for i in members]))
        for i in members:
            tpl.group[i] = g
            tpl.numbers[i] = numbers[i]
        if tpl.series[g] is not None or _settle(st, tpl, g):
            tpl.series_group.update(dict.fromkeys(members, g))


def _settle(st: PlanState, tpl: Templates, g: int) -> bool:
    """Judge every class of a single-number group now (one pair per pair of digit counts, and
    one pair of equal numbers); ``True`` (the group is *settled*: skipped by the search like a
    series) when each class of different numbers is ``"distinct"`` and equal numbers are
    ``"same"``. More than :data:`SETTLE_MAX_CLASSES` classes, or another answer: ``False``."""
    members = tpl.members[g]
    if len(members) < SERIES_MIN or len(tpl.numbers[members[0]]) != 1:
        return False  # a pair or two is judged as it is
    first: dict[int, dict[str, int]] = {}  # digit count → value → its first member
    for i in members:
        (v,) = tpl.numbers[i]
        first.setdefault(len(v), {}).setdefault(v, i)
    lengths = sorted(first)
    reps: list[tuple[int, int]] = []
    for x, p in enumerate(lengths):
        for q in lengths[x:]:
            va, vb = list(first[p].values()), list(first[q].values())
            b = next((j for j in vb if j != va[0]), None)
            if b is not None:
                reps.append((va[0], b))
    firsts = {i for by_value in first.values() for i in by_value.values()}
    dup = next((i for i in members if i not in firsts), None)
    if dup is not None:
        (number,) = tpl.numbers[dup]
        reps.append((first[len(number)][number], dup))
    if len(reps) > SETTLE_MAX_CLASSES:
        return False
    return all(template_verdict(st, min(a, b), max(a, b), count=False) is not None for a, b in reps)


def _series_verdict(slot: int, a: tuple[str, ...], b: tuple[str, ...]) -> PairVerdict:
    return PairVerdict(
        DISTINCT,
        None,
        None,
        (
            f"a numbered series: number {slot + 1} of the template ({a[slot]} vs {b[slot]}) "
            "differs in every member, so it names separate records, not a changed value",
        ),
    )


def template_verdict(st: PlanState, a: int, b: int, *, count: bool = True) -> PairVerdict | None:
    """The group's answer for the pair ``a < b`` when both are in one template group and it has
    one (a numbered series, or a ``"distinct"`` class judgment), else ``None``: judge the pair.

    A class is judged here the first time one of its pairs is asked (``judge_pair`` on that
    pair at cosine 1.0)."""
    tpl: Templates | None = st.templates
    if tpl is None:
        return None
    g = tpl.group.get(a)
    if g is None or tpl.group.get(b) != g:
        return None
    na, nb = tpl.numbers[a], tpl.numbers[b]
    slot = tpl.series[g]
    if slot is not None and na != nb:
        tpl.answered += 1
        return _series_verdict(slot, na, nb)
    cls = tuple(
        (k, min(len(x), len(y)), max(len(x), len(y)))
        for k, (x, y) in enumerate(zip(na, nb, strict=True))
        if x != y
    )
    v = tpl.verdicts.get((g, cls))
    if v is None:
        v = judge_pair(
            st.docs[a],
            st.metas[a],
            st.docs[b],
            st.metas[b],
            cosine=1.0,
            fieldmap=st.fm,
            policy=st.policy,
        )
        tpl.verdicts[(g, cls)] = v
    if v.kind != (SAME if not cls else DISTINCT):
        return None
    tpl.answered += count
    return v
