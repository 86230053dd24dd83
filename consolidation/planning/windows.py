"""Window stages: merge units from groups, evidence folds, session windows, semantic windows.

A *unit* (:class:`~.state.Units`) is a set of memories that becomes one MERGE: a duplicate
group, an episodic turn folded into the fact citing it (``evidence_fold``), consecutive turns
of one session (``session_window``) or semantic facts of one session and speaker
(``semantic_window``). A contradicting memory never joins a unit.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ..text import content_tokens, labelled_fragment, novel_sentences
from .grouping import conflicts
from .operations import promotion_rules
from .state import EPISODIC, SEMANTIC, SUMMARY, Column, PlanState, natural, shared_tuple

__all__ = ["fold_evidence", "semantic_windows", "session_windows", "start_units"]


def _join(text: str, fragment: str) -> str:
    text = text.rstrip()
    if text and text[-1] not in ".!?;":
        text += "."
    return f"{text} {fragment}" if text else fragment


def episodic(st: PlanState, i: int) -> bool:
    """Whether ``i`` is an episodic-only memory free to fold or window (eligible, not removed,
    in no unit; new, in a partial incremental pass)."""
    return (
        st.eligible[i]
        and not st.removed[i]
        and i not in st.units.of
        and st.layers[i] == {EPISODIC}
        and (not st.partial or st.is_new[i])
    )


def semantic(st: PlanState, i: int) -> bool:
    """Whether ``i`` is an eligible semantic memory that is not a summary."""
    return st.eligible[i] and SEMANTIC in st.layers[i] and SUMMARY not in st.layers[i]


def start_units(st: PlanState) -> None:
    """One unit per group of :func:`~.grouping.link_groups`, plus the per-memory speakers,
    single-speaker labels, sessions and chronological order (session, created_at, natural id)
    the window stages use."""
    fm, metas, ids, n = st.fm, st.metas, st.ids, st.n
    for i in sorted(st.group_of):
        group = st.group_of[i]
        if group[0] == i:
            st.units.add(list(group), st.merged_text[i], None)
    speakers = st.speakers = Column(n, lambda i: fm.get_list(metas[i], fm.speaker))
    st.labels = Column(n, lambda i: sp[0] if len(sp := speakers[i]) == 1 else None)
    sessions = st.sessions = Column(
        n, lambda i: shared_tuple(tuple(sorted(set(fm.get_sessions(metas[i])))))
    )
    epoch = datetime.min.replace(tzinfo=UTC)
    st.order = Column(
        n, lambda i: (sessions[i], fm.get_created_at(metas[i]) or epoch, natural(ids[i]))
    )


def fold_evidence(st: PlanState) -> None:
    """Stage ``folds``: each free episodic memory joins the most similar semantic memory that
    cites all of its evidence (only sentences with new content words kept, the result at most
    ``fold_max_chars``). Sets ``st.candidates["folded"]``."""
    policy, fm, metas, docs, units, emb = st.policy, st.fm, st.metas, st.docs, st.units, st.emb
    if not policy.fold_evidence:
        return
    free = sorted((i for i in st.new_rows if episodic(st, i)), key=st.order.__getitem__)
    wanted = {x for e in free for x in fm.get_list(metas[e], fm.evidence)}
    cited_by: dict[str, list[int]] = {}
    for t in range(st.n) if wanted else ():
        v = metas[t].get(fm.evidence)
        if v is None or v == "" or not semantic(st, t):
            continue  # no evidence: cites nothing (the cheap test first: 1M memories)
        for cited in set(fm.get_list(metas[t], fm.evidence)):
            if cited in wanted:
                cited_by.setdefault(cited, []).append(t)
    folds = 0
    for e in free:
        ev = set(fm.get_list(metas[e], fm.evidence))
        if not ev:
            continue
        targets = set.intersection(*(set(cited_by.get(x, ())) for x in ev)) - {e}
        order = {t: (-float(emb[t] @ emb[e]), st.ids[t]) for t in targets}
        for t in sorted(targets, key=order.__getitem__):
            u = units.of.get(t)
            members = units.members[u] if u is not None else [t]
            if conflicts(st, e, members, "evidence_fold"):
                continue  # a contradicting turn is never folded (try the next citer)
            if len(members) >= policy.max_group_size:
                break
            text = units.text[u] if u is not None else docs[t].strip()
            covered = set(content_tokens(text))
            frag = labelled_fragment(docs[e], st.labels[e], covered)
            new_text = text if frag is None else _join(text, frag)
            if len(new_text) > policy.fold_max_chars:
                break  # only the most similar citer is tried for size: one turn, one fact
            if u is None:
                u = units.add([t], text, "evidence_fold")
            units.extend(u, [e], new_text, "evidence_fold")
            folds += 1
            break
    st.candidates["folded"] = folds


def session_windows(st: PlanState) -> None:
    """Stage ``session windows``: consecutive free episodic memories of one session (not
    meeting a promotion rule, not contradicting) become one unit of at most
    ``window_max_size`` members and ``max_merged_chars`` characters, repeated content
    dropped."""
    policy, docs, labels, sessions, units = st.policy, st.docs, st.labels, st.sessions, st.units
    if policy.window_max_size <= 1:
        return
    cur: list[int] = []
    lines: list[str] = []
    covered_w: set[str] = set()

    def flush() -> None:
        if len(cur) >= 2 and lines:
            units.add(list(cur), "\n".join(lines), "session_window")
        cur.clear()
        lines.clear()
        covered_w.clear()

    pool = [
        i
        for i in st.new_rows
        if episodic(st, i) and not promotion_rules(st.metas[i], policy, st.fm)
    ]
    for i in sorted(pool, key=st.order.__getitem__):
        trial = set(covered_w)
        frag = labelled_fragment(docs[i], labels[i], trial)
        text = "\n".join(lines + ([frag] if frag else []))
        if cur and (
            sessions[i] != sessions[cur[0]]
            or len(cur) >= policy.window_max_size
            or len(text) > policy.max_merged_chars
            or conflicts(st, i, cur, "session_window")
        ):
            flush()
            trial = set()
            frag = labelled_fragment(docs[i], labels[i], trial)
            text = frag or ""
        if len(text) > policy.max_merged_chars:
            continue  # a single turn longer than the bound stays as it is
        cur.append(i)
        if frag:
            lines.append(frag)
        covered_w |= trial
    flush()


def semantic_windows(st: PlanState) -> None:
    """Stage ``semantic windows``: semantic memories (and folds, and all-semantic duplicate
    groups) of one session and speaker set become one unit of at most
    ``semantic_window_size`` items, ``max_group_size`` members and ``semantic_window_chars``
    characters, only sentences with new content kept."""
    policy, units, sessions, speakers = st.policy, st.units, st.sessions, st.speakers
    if policy.semantic_window_size <= 1:
        return
    items: list[tuple[Any, list[int], str]] = []
    for u in units.live():
        members = units.members[u]
        if units.rule[u] == "evidence_fold" or (
            units.rule[u] is None and all(semantic(st, k) for k in members)
        ):
            items.append((members[0], members, units.text[u]))
    items += [
        (i, [i], st.docs[i].strip()) for i in st.new_rows if semantic(st, i) and i not in units.of
    ]

    def skey(head: int) -> tuple[Any, ...]:
        return (sessions[head], tuple(speakers[head]))

    items.sort(key=lambda it: (skey(it[0]), st.order[it[0]]))
    chunk: list[tuple[Any, list[int], str]] = []

    def flush_sem() -> None:
        if len(chunk) >= 2:
            members = [k for _, ms, _ in chunk for k in ms]
            covered_s: set[str] = set()
            parts = []
            for _, _, text in chunk:
                kept = novel_sentences(text, covered_s)
                if kept:
                    parts.append(" ".join(kept))
            for _, ms, _ in chunk:
                if ms[0] in units.of:
                    units.drop(units.of[ms[0]])
            units.add(members, " ".join(parts), "semantic_window")
        chunk.clear()

    for it in items:
        if chunk:
            size = sum(len(ms) for _, ms, _ in chunk) + len(it[1])
            length = sum(len(t) + 1 for _, _, t in chunk) + len(it[2])
            if (
                skey(it[0]) != skey(chunk[0][0])
                or len(chunk) >= policy.semantic_window_size
                or size > policy.max_group_size
                or length > policy.semantic_window_chars
                or any(conflicts(st, k, ms, "semantic_window") for k in it[1] for _, ms, _ in chunk)
            ):
                flush_sem()
        chunk.append(it)
    flush_sem()
