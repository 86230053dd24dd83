"""JSONL import/export: exact round trip; malformed files are refused whole; --skip-invalid."""

from __future__ import annotations

import json
from io import StringIO

import numpy as np
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError

from consolidation.jsonl import MAX_ERRORS, read_jsonl
from memoryadmin.agents.selectors.agents import agent_census
from memoryadmin.core import stores
from memoryadmin.core.models import AuditEvent
from memoryadmin.memories.services.memories import memory_edit
from memoryadmin.memories.services.transfer import ImportRefused, memories_import_jsonl

META = [
    {
        "speaker": "Alice",
        "session": 3,
        "evidence": ["D1:1", "D2:4"],
        "pinned": True,
        "importance": 0.9,
    },
    {"speaker": "Bob", "tags": ["x"]},
    {},
]


def all_records(agent):
    return {
        r.id: r
        for page in stores.get_store(agent).iter_pages(include_embeddings=True)
        for r in page
    }


@pytest.mark.django_db
def test_export_then_import_into_a_new_agent_is_identical(agent_with_memories, tmp_path):
    source = agent_with_memories(3, META)
    path = tmp_path / "out.jsonl"
    out = StringIO()
    call_command("export_memories", source.slug, str(path), stdout=out)
    assert "3 memories exported" in out.getvalue()
    assert len(path.read_text().splitlines()) == 3

    target = agent_with_memories(0)
    out = StringIO()
    call_command("import_memories", target.slug, str(path), stdout=out)
    assert "3 written" in out.getvalue() and "0 embedded" in out.getvalue()
    a, b = all_records(source), all_records(target)
    assert a.keys() == b.keys()
    for mid in a:
        assert a[mid].document == b[mid].document
        assert a[mid].metadata == b[mid].metadata
        assert np.array_equal(a[mid].embedding, b[mid].embedding)

    # Importing the same file again writes nothing new.
    out = StringIO()
    call_command("import_memories", target.slug, str(path), "--json", stdout=out)
    assert json.loads(out.getvalue())["unchanged"] == 3


def good(mid: str, **extra) -> str:
    return json.dumps({"id": mid, "document": f"memory {mid}", "metadata": {"n": 1}, **extra})


MALFORMED = [
    ("truncated JSON", good("a") + "\n" + '{"id": "b", "document": "cut', "line 2: invalid JSON"),
    (
        "wrong types",
        good("a") + "\n" + json.dumps({"id": "b", "document": 42}),
        "line 2: 'document' must be a string",
    ),
    ("duplicate ids", good("a") + "\n" + good("a"), "line 2: duplicate id 'a' (first on line 1)"),
    (
        "empty document",
        json.dumps({"id": "a", "document": ""}) + "\n" + good("b"),
        "line 1: 'document' is empty",
    ),
    (
        "1 MB document",
        good("a") + "\n" + json.dumps({"id": "b", "document": "x" * 1_000_000}),
        "line 2: 'document' is 1,000,000 characters long",
    ),
    ("bad embedding", good("a", embedding=[0.1] * 10), "line 1: 'embedding' has 10 numbers"),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("case", "content", "message"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_a_malformed_file_is_refused_whole(agent_with_memories, tmp_path, case, content, message):
    agent = agent_with_memories(2)
    path = tmp_path / "bad.jsonl"
    path.write_text(content + "\n", encoding="utf-8")
    err = StringIO()
    with pytest.raises(CommandError) as exc:
        call_command("import_memories", agent.slug, str(path), stderr=err)
    assert exc.value.returncode == 2
    assert message in err.getvalue()
    assert "nothing written" in str(exc.value) and "\n" not in str(exc.value)
    assert stores.get_store(agent).count() == 2  # nothing from the file was written


@pytest.mark.django_db
def test_non_utf8_bytes_are_refused_with_the_line(agent_with_memories, tmp_path):
    agent = agent_with_memories(0)
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(
        good("a").encode() + b"\n" + '{"id": "b", "document": "caf\xe9"}'.encode("latin-1") + b"\n"
    )
    err = StringIO()
    with pytest.raises(CommandError) as exc:
        call_command("import_memories", agent.slug, str(path), stderr=err)
    assert exc.value.returncode == 2 and "line 2: not UTF-8" in err.getvalue()
    assert stores.get_store(agent).count() == 0


@pytest.mark.django_db
def test_skip_invalid_writes_the_valid_lines_and_lists_the_rest(agent_with_memories, tmp_path):
    agent = agent_with_memories(0)
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join([good("a"), "{oops", good("c")]) + "\n", encoding="utf-8")
    out, err = StringIO(), StringIO()
    call_command("import_memories", agent.slug, str(path), "--skip-invalid", stdout=out, stderr=err)
    assert "line 2: invalid JSON" in err.getvalue()
    assert "2 written" in out.getvalue() and "1 invalid line skipped" in out.getvalue()
    assert set(all_records(agent)) == {"a", "c"}
    assert all_records(agent)["a"].embedding.shape == (384,)  # computed on import


@pytest.mark.django_db
def test_the_upload_service_validates_the_same_way(agent_with_memories, alice):
    agent = agent_with_memories(0)
    upload = SimpleUploadedFile("m.jsonl", (good("a") + "\n{\n").encode())
    with pytest.raises(ImportRefused) as exc:
        memories_import_jsonl(agent=agent, fileobj=upload, skip_invalid=False, user=alice)
    assert [str(e) for e in exc.value.errors] == [
        "line 2: invalid JSON (Expecting property name enclosed in double quotes at column 2)"
    ]
    assert stores.get_store(agent).count() == 0
    upload = SimpleUploadedFile("m.jsonl", (good("a") + "\n").encode())
    report = memories_import_jsonl(agent=agent, fileobj=upload, skip_invalid=False, user=alice)
    assert report.written == 1
    event = AuditEvent.objects.get(agent=agent, verb="memories_imported")
    assert event.actor == "alice" and event.user == alice


@pytest.mark.django_db
def test_unknown_agent_is_bad_input(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text(good("a") + "\n")
    for cmd, args in (("import_memories", [str(path)]), ("export_memories", [str(path)])):
        with pytest.raises(CommandError) as exc:
            call_command(cmd, "no-such-agent", *args)
        assert exc.value.returncode == 2 and "Unknown agent 'no-such-agent'" in str(exc.value)


@pytest.mark.django_db
def test_a_round_trip_keeps_the_content_hash_and_embeddings_within_one_ulp(
    agent_with_memories, tmp_path
):
    """What the census compares after a re-write into a cosine collection: the content
    hash exactly, each embedding within 1 ulp; the full hash reports any drift, never hides it."""
    from consolidation import MemoryRecord

    rng = np.random.default_rng(5)
    vecs = rng.normal(size=(300, 384)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    source = agent_with_memories(0)
    stores.get_store(source).upsert(
        [MemoryRecord(f"r{i:03d}", f"Fact {i}.", vecs[i], {"i": i}) for i in range(300)]
    )
    path = tmp_path / "out.jsonl"
    call_command("export_memories", source.slug, str(path), stdout=StringIO())
    target = agent_with_memories(0)
    call_command("import_memories", target.slug, str(path), stdout=StringIO())
    a, b = agent_census(agent=source), agent_census(agent=target)
    assert a["store"]["content_sha256"] == b["store"]["content_sha256"]
    ra, rb = all_records(source), all_records(target)
    ids = sorted(ra)
    assert stores.embeddings_within_ulp(
        np.stack([ra[i].embedding for i in ids]), np.stack([rb[i].embedding for i in ids])
    )
    drifted = sum(not np.array_equal(ra[i].embedding, rb[i].embedding) for i in ids)
    assert (a["store"]["sha256"] == b["store"]["sha256"]) == (drifted == 0)


def test_embeddings_within_ulp_is_exactly_one_ulp():
    x = np.linspace(-1, 1, 384, dtype=np.float32)
    one = np.nextafter(x, np.float32(2))
    assert stores.embeddings_within_ulp(x, x) and stores.embeddings_within_ulp(x, one)
    assert not stores.embeddings_within_ulp(x, np.nextafter(one, np.float32(2)))
    assert not stores.embeddings_within_ulp(x, x[:10])


@pytest.mark.django_db
def test_a_memory_at_the_import_limit_can_be_edited(agent_with_memories, alice):
    from consolidation import MAX_DOCUMENT_CHARS

    agent = agent_with_memories(0)
    longest = "tea " * (MAX_DOCUMENT_CHARS // 4 - 1) + "tea!"
    assert len(longest) == MAX_DOCUMENT_CHARS
    line = json.dumps({"id": "long", "document": longest}) + "\n"
    report = memories_import_jsonl(agent=agent, fileobj=line.encode(), user=alice)
    assert report.written == 1
    edited = longest[:-1] + "?"
    memory_edit(agent=agent, memory_id="long", document=edited, user=alice)
    assert all_records(agent)["long"].document == edited
    with pytest.raises(ValueError, match=f"the limit is {MAX_DOCUMENT_CHARS:,}"):
        memory_edit(agent=agent, memory_id="long", document=edited + "!", user=alice)


@pytest.mark.django_db
def test_skip_invalid_reads_past_a_thousand_bad_lines_and_counts_them_all(
    agent_with_memories, tmp_path
):
    agent = agent_with_memories(0)
    bad = "not json\n" * 1_001
    good = "".join(json.dumps({"id": f"g{i}", "document": f"good {i}"}) + "\n" for i in range(50))
    path = tmp_path / "mixed.jsonl"
    path.write_text(bad + good)
    out, err = StringIO(), StringIO()
    call_command("import_memories", agent.slug, str(path), "--skip-invalid", stdout=out, stderr=err)
    assert stores.get_store(agent).count() == 50
    assert "1,001 invalid lines skipped" in out.getvalue()
    assert "1 more invalid lines (skipped)" in err.getvalue()
    event = AuditEvent.objects.get(agent=agent, verb="memories_imported")
    assert event.data["error_count"] == 1_001


@pytest.mark.django_db
def test_a_refusal_reports_the_true_count_of_bad_lines(agent_with_memories, tmp_path):
    agent = agent_with_memories(0)
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"{\n" * 150_000)
    records, errors = read_jsonl(path)
    assert (records, len(errors), errors.total) == ([], MAX_ERRORS, 150_000)
    with pytest.raises(ImportRefused, match="150,000 invalid line"):
        memories_import_jsonl(agent=agent, fileobj=path)
