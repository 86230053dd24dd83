"""LoCoMo parsing: the real file's counts, ids, metadata and session dates."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from consolidation.locomo import load_locomo, normalize_evidence, parse_samples, parse_session_date
from tests.conftest import locomo_path


@pytest.fixture(scope="module")
def conversations():
    return load_locomo(locomo_path())


# Per-conversation counts, computed independently from the source JSON in the test below.
EXPECTED = {
    "conv-26": (419, 184, 19, 152),
    "conv-30": (369, 169, 19, 81),
    "conv-41": (663, 324, 32, 152),
    "conv-42": (629, 266, 29, 199),
    "conv-43": (680, 267, 29, 178),
    "conv-44": (675, 277, 28, 123),
    "conv-47": (689, 268, 31, 150),
}


def test_it_matches_the_source_counts(conversations):
    raw = json.loads(locomo_path().read_text())
    assert [c.sample_id for c in conversations] == [s["sample_id"] for s in raw]
    for conv, sample in zip(conversations, raw, strict=True):
        turns = sum(
            len(v)
            for k, v in sample["conversation"].items()
            if k.startswith("session_") and isinstance(v, list)
        )
        obs = sum(len(f) for o in sample["observation"].values() for f in o.values())
        qa = sum(1 for q in sample["qa"] if q["category"] != 5)
        got = (
            conv.count("episodic"),
            conv.count("semantic"),
            conv.count("summary"),
            len(conv.probes),
        )
        assert got == (turns, obs, len(sample["session_summary"]), qa)
        assert got == EXPECTED[conv.sample_id]
    assert len(conversations) == 7
    assert sum(c.count("episodic") for c in conversations) == 4124
    assert sum(c.count("semantic") for c in conversations) == 1755


def test_ids_are_unique_and_deterministic(conversations):
    again = load_locomo(locomo_path(), conversations=["conv-26"])[0]
    first = conversations[0]
    assert [m.id for m in again.memories] == [m.id for m in first.memories]
    assert len({m.id for m in first.memories}) == len(first.memories)
    ids = {m.id for m in first.memories}
    assert {"conv-26:D1:3", "conv-26:obs:1:Caroline:1", "conv-26:sum:1"} <= ids


def test_turn_observation_and_summary_metadata(conversations):
    mems = {m.id: m for m in conversations[0].memories}
    turn = mems["conv-26:D1:3"]
    assert turn.document.startswith("Caroline: ")
    assert turn.metadata == {
        "speaker": "Caroline",
        "session": 1,
        "created_at": "2023-05-08T13:56:00+00:00",
        "layer": "episodic",
        "evidence": ["D1:3"],
        "source": "locomo",
        "conversation": "conv-26",
    }
    obs = mems["conv-26:obs:1:Caroline:1"]
    assert obs.document.startswith("Caroline attended an LGBTQ support group")
    assert obs.metadata["layer"] == "semantic" and obs.metadata["evidence"] == ["D1:3"]
    summary = mems["conv-26:sum:1"]
    assert summary.metadata["layer"] == "summary" and "speaker" not in summary.metadata
    assert summary.metadata["evidence"][0] == "D1:1"
    # Image captions are part of what the agent saw.
    assert "[shares a photo: " in mems["conv-26:D1:5"].document


def test_probes_skip_adversarial_and_stringify_answers(conversations):
    probes = conversations[0].probes
    assert all(p.category in (1, 2, 3, 4) for p in probes)
    first = probes[0]
    assert (first.question, first.answer, first.evidence, first.key) == (
        "When did Caroline go to the LGBTQ support group?",
        "7 May 2023",
        ("D1:3",),
        "conv-26:qa:0",
    )
    assert probes[1].answer == "2022"  # an int in the source


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("12:09 am on 13 September, 2023", datetime(2023, 9, 13, 0, 9, tzinfo=UTC)),
        ("12:30 pm on 1 January, 2022", datetime(2022, 1, 1, 12, 30, tzinfo=UTC)),
        ("10:04 am on 19 December, 2023", datetime(2023, 12, 19, 10, 4, tzinfo=UTC)),
        (" 7:00 pm on 31 July, 2023 ", datetime(2023, 7, 31, 19, 0, tzinfo=UTC)),
    ],
)
def test_it_parses_session_dates(text, expected):
    assert parse_session_date(text) == expected


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "8 May 2023",
        "1:56 pm on 8 Mayo, 2023",
        "13:56 pm on 8 May, 2023",
        "1:56 pm on 31 February, 2023",
        "1:56 on 8 May, 2023",
        "2023-05-08T13:56:00",
    ],
)
def test_it_rejects_other_date_strings_quoting_them(bad):
    with pytest.raises(ValueError) as exc:
        parse_session_date(bad)
    assert repr(bad) in str(exc.value)


def test_every_session_date_in_the_file_parses(conversations):
    assert all(c.sessions for c in conversations)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("D1:3", ["D1:3"]),
        ("D8:6; D9:17", ["D8:6", "D9:17"]),
        ("D26:14, D26:34, D26:42", ["D26:14", "D26:34", "D26:42"]),
        ("D:11:26", ["D11:26"]),
        ("D", []),
        (["D15:3", "D15:5", "D15:3"], ["D15:3", "D15:5"]),
    ],
)
def test_it_normalizes_evidence(value, expected):
    assert normalize_evidence(value) == expected


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"not": "a list"}, "expected a JSON list"),
        ([{"conversation": {}}], "missing sample_id"),
        (
            [
                {
                    "sample_id": "x",
                    "conversation": {
                        "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "hi"}],
                        "session_1_date_time": "yesterday",
                    },
                }
            ],
            "'yesterday'",
        ),
        ([{"sample_id": "x", "conversation": {}}], None),
    ],
)
def test_it_rejects_malformed_samples(data, message):
    if message is None:
        assert parse_samples(data)[0].memories == []
        return
    with pytest.raises(ValueError, match=message):
        parse_samples(data)


def test_it_selects_conversations_and_reports_unknown_ones():
    path = locomo_path()
    assert [c.sample_id for c in load_locomo(path, conversations=["conv-30"])] == ["conv-30"]
    with pytest.raises(ValueError, match="conv-99"):
        load_locomo(path, conversations=["conv-99"])
