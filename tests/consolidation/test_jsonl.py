"""JSONL validation and writing: every malformed line is reported with its number."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from consolidation import MemoryRecord
from consolidation.jsonl import MAX_DOCUMENT_CHARS, read_jsonl, write_jsonl


def line(**obj) -> bytes:
    return json.dumps(obj).encode()


GOOD = line(id="a", document="Alice likes tea", metadata={"speaker": "Alice", "tags": ["x"]})
VEC = [0.5] * 384


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (b'{"id": "b", "document": "trunc', "invalid JSON"),
        (b"[1, 2]", "expected a JSON object, got list"),
        (line(id="", document="x"), "'id' must be a non-empty string"),
        (line(id=7, document="x"), "'id' must be a non-empty string"),
        (line(id="b", document=""), "'document' is empty"),
        (line(id="b", document="   "), "'document' is empty"),
        (line(id="b", document=["x"]), "'document' must be a string, got list"),
        (line(id="b", document="x" * 1_000_000), "1,000,000 characters long (maximum 100,000)"),
        (line(id="b", document="x", metadata="speaker=A"), "'metadata' must be an object"),
        (line(id="b", document="x", embedding="0.1,0.2"), "'embedding' must be a list"),
        (line(id="b", document="x", embedding=[0.1] * 383), "has 383 numbers (expected 384)"),
        (line(id="b", document="x", embedding=[0.1] * 383 + ["a"]), "holds 'a'"),
        (line(id="b", document="x", embedding=[0.1] * 383 + [True]), "holds True"),
        (b'{"id": "b", "document": "x", "embedding": [' + b"0.1, " * 383 + b"NaN]}", "holds nan"),
        (line(id="b", documnet="x"), "unknown field(s) 'documnet'"),
        (line(id="a", document="again"), "duplicate id 'a' (first on line 1)"),
        (b'{"id": "b", "document": "caf\xe9"}', "not UTF-8 (byte 0xe9 at column 29)"),
        # each of these used to pass validation and fail half-way through the write
        (
            b'{"id": "b", "document": "x\\ud800y"}',
            "'document' holds a lone surrogate \\ud800 at character 2",
        ),
        (b'{"id": "\\udfff", "document": "x"}', "'id' holds a lone surrogate \\udfff"),
        (b'{"id": "b", "document": "x", "metadata": {"\\ud800": 1}}', "key with a lone surrogate"),
        (
            b'{"id": "b", "document": "x", "metadata": {"k": {"j": ["\\udbff"]}}}',
            "'metadata'['k']['j'][0] holds a lone surrogate \\udbff",
        ),
        (
            b'{"id": "b", "document": "x", "metadata": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
            "nested deeper than 32 levels",
        ),
        (b"[" * 100_000, "nested deeper than 32 levels"),
        (b'{"id": "b", "document": "x", "metadata": {"n": ' + b"9" * 5000 + b"}}", "4300 digits"),
        (
            b'{"id": "b", "document": "x", "embedding": [' + b"1e39, " * 383 + b"1]}",
            "every value must be a finite float32 number",
        ),
        (
            b'{"id": "b", "document": "x", "embedding": ['
            + b"1"
            + b"0" * 400
            + b", 0" * 383
            + b"]}",
            "every value must be a finite float32 number",
        ),
        (b'{"id": "b", "document": "x\\u0000y"}', "'document' holds a NUL character"),
        (b'{"id": "b\\u0000", "document": "x"}', "'id' holds a NUL character"),
        (
            b'{"id": "b", "document": "x", "metadata": {"k": ["a\\u0000"]}}',
            "'metadata'['k'][0] holds a NUL character",
        ),
        (b'{"id": "b", "document": "x", "metadata": {"\\u0000": 1}}', "key with a NUL"),
        (b'{"id": "b"}', "'document' is missing"),
        (b'{"id": "b", "document": null}', "'document' is null"),
        (line(id="b", document="x", metadata={"#k": 1}), "reserved by Chroma"),
        (line(id="b", document="x", metadata={"": 1}), "must not be empty"),
    ],
)
def test_it_reports_each_bad_line_with_its_number(bad, message):
    records, errors = read_jsonl(GOOD + b"\n\n" + bad + b"\n")
    assert [r.id for r in records] == ["a"]
    assert len(errors) == 1
    assert errors[0].line == 3
    assert message in errors[0].message
    assert str(errors[0]).startswith("line 3: ")


def test_it_lists_every_error_not_only_the_first():
    data = b"\n".join([GOOD, b"{", line(id="c", document=""), line(id="d", document="ok")])
    records, errors = read_jsonl(data)
    assert [r.id for r in records] == ["a", "d"]
    assert [e.line for e in errors] == [2, 3]


def test_it_reads_paths_and_binary_files(tmp_path):
    p = tmp_path / "m.jsonl"
    p.write_bytes(GOOD + b"\n" + line(id="b", document="Bob", embedding=VEC) + b"\n")
    for source in (p, str(p), io.BytesIO(p.read_bytes()), p.read_bytes()):
        records, errors = read_jsonl(source)
        assert errors == []
        assert records[0].metadata == {"speaker": "Alice", "tags": ["x"]}
        assert records[0].embedding is None
        assert records[1].embedding.dtype == np.float32 and records[1].embedding.shape == (384,)


def test_it_refuses_text_mode_files():
    with pytest.raises(TypeError, match="binary"):
        read_jsonl(io.StringIO(GOOD.decode()))


def test_round_trip_is_identical():
    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((3, 384)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    records = [
        MemoryRecord(
            "m1", "Héllo — ünïcode ✓", vecs[0], {"n": 1, "f": 0.25, "b": True, "l": ["a", "b"]}
        ),
        MemoryRecord("m2", "line\nbreak", vecs[1], {}),
        MemoryRecord("m3", "no vector", None, {"nested": {"k": [1, 2]}}),
    ]
    buf = io.StringIO()
    assert write_jsonl(records, buf) == 3
    back, errors = read_jsonl(buf.getvalue().encode("utf-8"))
    assert errors == []
    for a, b in zip(records, back, strict=True):
        assert (a.id, a.document, a.metadata) == (b.id, b.document, b.metadata)
        if a.embedding is None:
            assert b.embedding is None
        else:
            assert np.array_equal(a.embedding, b.embedding)


def test_document_limit_is_inclusive():
    ok = line(id="x", document="y" * MAX_DOCUMENT_CHARS)
    records, errors = read_jsonl(ok)
    assert errors == [] and len(records) == 1


def test_brackets_and_escapes_inside_strings_are_not_nesting():
    doc = "[" * 100 + '\\"' + "{" * 100
    records, errors = read_jsonl(line(id="b", document=doc, metadata={"k": "]]]" * 50}))
    assert errors == [] and records[0].document == doc


def test_valid_surrogate_pairs_are_emoji_not_errors():
    records, errors = read_jsonl(b'{"id": "e", "document": "tea \\ud83c\\udf75 time"}')
    assert errors == [] and records[0].document == "tea \U0001f375 time"


def test_a_byte_order_mark_before_the_first_line_is_not_content():
    records, errors = read_jsonl(b"\xef\xbb\xbf" + GOOD + b"\n" + line(id="z", document="ok"))
    assert not errors and [r.id for r in records] == ["a", "z"]


def test_metadata_formats_of_the_readme_are_checked_with_the_line_and_key() -> None:
    from consolidation import FieldMap as _FieldMap

    lines = [
        {"id": "a", "document": "ok", "metadata": {"importance": 1, "updated_at": "2026-03-01"}},
        {"id": "b", "document": "x", "metadata": {"importance": 7}},
        {"id": "c", "document": "x", "metadata": {"created_at": "yesterday"}},
        {"id": "d", "document": "x", "metadata": {"pinned": "maybe"}},
        {"id": "e", "document": "x", "metadata": {"weight": 7}},  # mapped key: checked
    ]
    data = "\n".join(json.dumps(x) for x in lines).encode()
    records, errors = read_jsonl(data)
    assert [r.id for r in records] == ["a", "e"]
    assert [(e.line, e.message.split(" is ")[0]) for e in errors] == [
        (2, "metadata 'importance'"),
        (3, "metadata 'created_at'"),
        (4, "metadata 'pinned'"),
    ]
    records, errors = read_jsonl(data, _FieldMap(importance="weight"))
    assert "e" not in [r.id for r in records] and "b" in [r.id for r in records]
