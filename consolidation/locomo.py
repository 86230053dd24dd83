"""Parse LoCoMo's published ``locomo10.json`` format into memories and probe queries (pure).

Source format: snap-research/LoCoMo ``data/locomo10.json`` (Maharana et al., ACL 2024; see
``docs/SOURCES.md`` "LoCoMo"): a JSON list of samples, each with ``sample_id``,
``conversation`` (``speaker_a``, ``speaker_b``, ``session_N_date_time``, ``session_N`` turns),
``observation``, ``session_summary`` and ``qa``.

Each conversation becomes:

- one **episodic** memory per dialog turn, id ``"<sample>:<dia_id>"`` (``"conv-26:D1:3"``),
  text ``"<speaker>: <text>"`` plus ``" [shares a photo: <caption>]"`` when the turn carries an
  image caption (the caption is what the agent saw);
- one **semantic** memory per observation, id ``"<sample>:obs:<session>:<speaker>:<n>"`` (n counts
  from 1 within that speaker's list for the session);
- one **summary** memory per session summary, id ``"<sample>:sum:<session>"``;
- one probe per QA item of categories 1–4 (category 5 is adversarial and has no answer), keyed
  ``"<sample>:qa:<index in the qa list>"``.

Metadata (keys of :class:`~consolidation.records.FieldMap`): ``speaker`` (not on summaries),
``session`` (int), ``created_at`` (ISO 8601 UTC, from the session's date), ``layer``,
``evidence`` (non-empty list of dia_ids: a turn's own id, an observation's source turns, every
turn of a summary's session), plus ``source`` = ``"locomo"`` and ``conversation`` = the sample id.
Ids are deterministic, so importing twice upserts the same memories.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .recall import Probe
from .records import MemoryRecord

__all__ = [
    "LocomoConversation",
    "load_locomo",
    "normalize_evidence",
    "parse_samples",
    "parse_session_date",
]

_MONTHS = {
    m: i
    for i, m in enumerate(
        [
            "January",
            "February",
            "March",
            "April",
            "May",
            "June",
            "July",
            "August",
            "September",
            "October",
            "November",
            "December",
        ],
        start=1,
    )
}
_DATE = re.compile(r"(\d{1,2}):(\d{2}) (am|pm) on (\d{1,2}) ([A-Za-z]+), (\d{4})")
_DIA = re.compile(r"D:?(\d+):(\d+)")
_SESSION = re.compile(r"session_(\d+)")


def parse_session_date(text: str) -> datetime:
    """Parse a LoCoMo session date such as ``"1:56 pm on 8 May, 2023"`` → aware UTC datetime.

    The format is exactly ``H:MM am|pm on D Month, YYYY`` (full English month name; LoCoMo gives
    no time zone, UTC is assumed). Raises ``ValueError`` quoting the string otherwise.
    """
    m = _DATE.fullmatch(text.strip()) if isinstance(text, str) else None
    if not m:
        raise ValueError(
            f"unrecognised LoCoMo session date {text!r} (expected e.g. '1:56 pm on 8 May, 2023')"
        )
    hour, minute, ampm, day, month_name, year = m.groups()
    month = _MONTHS.get(month_name.capitalize())
    h = int(hour)
    if month is None or not 1 <= h <= 12:
        raise ValueError(
            f"unrecognised LoCoMo session date {text!r} (expected e.g. '1:56 pm on 8 May, 2023')"
        )
    h = h % 12 + (12 if ampm == "pm" else 0)
    try:
        return datetime(int(year), month, int(day), h, int(minute), tzinfo=UTC)
    except ValueError as exc:
        raise ValueError(f"invalid LoCoMo session date {text!r}: {exc}") from None


def normalize_evidence(value: Any) -> list[str]:
    """Dia ids from a LoCoMo evidence value, deduplicated in order.

    Accepts a string (``"D1:3"``, or the file's occasional ``"D8:6; D9:17"``,
    ``"D26:14, D26:34"`` and ``"D:11:26"`` forms) or a list of them; unusable fragments (``"D"``)
    are dropped.
    """
    items: Iterable[Any] = value if isinstance(value, list | tuple) else [value]
    out: dict[str, None] = {}
    for item in items:
        for a, b in _DIA.findall(str(item)):
            out.setdefault(f"D{int(a)}:{int(b)}", None)
    return list(out)


@dataclass
class LocomoConversation:
    """One LoCoMo sample as memories (``MemoryRecord`` without embeddings) and probes.

    ``sessions`` maps session number → its date (aware UTC) for sessions that have turns.
    """

    sample_id: str
    speakers: tuple[str, str]
    sessions: dict[int, datetime]
    memories: list[MemoryRecord] = field(default_factory=list)
    probes: list[Probe] = field(default_factory=list)

    def count(self, layer: str) -> int:
        """Number of memories of ``layer`` ("episodic", "semantic" or "summary")."""
        return sum(1 for m in self.memories if m.metadata.get("layer") == layer)

    @property
    def slug(self) -> str:
        """Agent slug for this conversation: ``"locomo-" + sample_id`` (``locomo-conv-26``)."""
        return "locomo-" + re.sub(r"[^a-z0-9-]+", "-", self.sample_id.lower()).strip("-")


def _session_numbers(keys: Iterable[str], suffix: str) -> dict[int, str]:
    out: dict[int, str] = {}
    for k in keys:
        m = re.fullmatch(rf"session_(\d+){suffix}", k)
        if m:
            out[int(m.group(1))] = k
    return dict(sorted(out.items()))


def _parse_sample(sample: Any, position: int) -> LocomoConversation:
    if not isinstance(sample, dict):
        raise ValueError(f"sample #{position + 1}: expected an object, got {type(sample).__name__}")
    sid = sample.get("sample_id")
    if not isinstance(sid, str) or not sid.strip():
        raise ValueError(f"sample #{position + 1}: missing sample_id")
    conv = sample.get("conversation")
    if not isinstance(conv, dict):
        raise ValueError(f"{sid}: missing 'conversation' object")
    speakers = (str(conv.get("speaker_a", "")), str(conv.get("speaker_b", "")))

    sessions: dict[int, datetime] = {}
    session_turns: dict[int, list[str]] = {}
    memories: list[MemoryRecord] = []
    for n, key in _session_numbers(conv, "").items():
        turns = conv[key]
        if not isinstance(turns, list) or not turns:
            continue
        date_text = conv.get(f"{key}_date_time")
        if date_text is None:
            raise ValueError(f"{sid}: {key} has no {key}_date_time")
        when = parse_session_date(date_text)
        sessions[n] = when
        session_turns[n] = []
        for t in turns:
            if not isinstance(t, dict) or not t.get("dia_id") or not isinstance(t.get("text"), str):
                raise ValueError(f"{sid}: malformed turn in {key}: {str(t)[:80]!r}")
            dia = normalize_evidence(t["dia_id"])
            dia_id = dia[0] if dia else str(t["dia_id"])
            text = f"{t.get('speaker', '')}: {t['text']}"
            if t.get("blip_caption"):
                text += f" [shares a photo: {t['blip_caption']}]"
            session_turns[n].append(dia_id)
            memories.append(
                MemoryRecord(
                    f"{sid}:{dia_id}",
                    text,
                    None,
                    {
                        "speaker": str(t.get("speaker", "")),
                        "session": n,
                        "created_at": when.isoformat(),
                        "layer": "episodic",
                        "evidence": [dia_id],
                        "source": "locomo",
                        "conversation": sid,
                    },
                )
            )

    observations = sample.get("observation") or {}
    for n, key in _session_numbers(observations, "_observation").items():
        by_speaker = observations[key] or {}
        day = sessions.get(n)
        for speaker, facts in by_speaker.items():
            for i, fact in enumerate(facts or [], start=1):
                if not isinstance(fact, list | tuple) or not fact or not isinstance(fact[0], str):
                    raise ValueError(f"{sid}: malformed observation in {key}: {str(fact)[:80]!r}")
                evidence = normalize_evidence(fact[1] if len(fact) > 1 else [])
                meta: dict[str, Any] = {
                    "speaker": str(speaker),
                    "session": n,
                    "layer": "semantic",
                    "source": "locomo",
                    "conversation": sid,
                }
                if day is not None:
                    meta["created_at"] = day.isoformat()
                if evidence:
                    meta["evidence"] = evidence
                memories.append(MemoryRecord(f"{sid}:obs:{n}:{speaker}:{i}", fact[0], None, meta))

    summaries = sample.get("session_summary") or {}
    for n, key in _session_numbers(summaries, "_summary").items():
        text = summaries[key]
        if not isinstance(text, str) or not text.strip():
            continue
        meta = {"session": n, "layer": "summary", "source": "locomo", "conversation": sid}
        if n in sessions:
            meta["created_at"] = sessions[n].isoformat()
        if session_turns.get(n):
            meta["evidence"] = list(session_turns[n])
        memories.append(MemoryRecord(f"{sid}:sum:{n}", text, None, meta))

    probes: list[Probe] = []
    for i, qa in enumerate(sample.get("qa") or []):
        if not isinstance(qa, dict):
            raise ValueError(f"{sid}: malformed qa item #{i}")
        category = qa.get("category")
        if category not in (1, 2, 3, 4) or qa.get("answer") is None:
            continue
        probes.append(
            Probe(
                question=str(qa.get("question", "")),
                answer=str(qa["answer"]),
                evidence=tuple(normalize_evidence(qa.get("evidence") or [])),
                category=int(category),
                key=f"{sid}:qa:{i}",
            )
        )
    return LocomoConversation(sid, speakers, sessions, memories, probes)


def parse_samples(
    data: Any, *, conversations: Sequence[str] | None = None
) -> list[LocomoConversation]:
    """Parse the decoded JSON (a list of samples). ``conversations`` keeps only those sample ids.

    Raises ``ValueError`` for a non-list document, a malformed sample, a bad session date, or a
    requested conversation that is not in the file.
    """
    if not isinstance(data, list):
        raise ValueError(f"expected a JSON list of LoCoMo samples, got {type(data).__name__}")
    wanted = set(conversations or [])
    out = []
    for i, sample in enumerate(data):
        if wanted and isinstance(sample, dict) and sample.get("sample_id") not in wanted:
            continue
        out.append(_parse_sample(sample, i))
    missing = wanted - {c.sample_id for c in out}
    if missing:
        raise ValueError(f"conversation(s) not in the file: {', '.join(sorted(missing))}")
    return out


def load_locomo(
    path: str | Path, *, conversations: Sequence[str] | None = None
) -> list[LocomoConversation]:
    """Read a ``locomo10.json``-format file (or a subset such as ``locomo7.json``).

    Raises ``ValueError`` with the file name for invalid JSON or content (see
    :func:`parse_samples`), ``OSError`` when the file cannot be read.
    """
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{p.name}: not a LoCoMo JSON file ({exc})") from None
    return parse_samples(data, conversations=conversations)
