"""import_locomo on the real LoCoMo file: counts, metadata, probes, idempotent re-run, bad input."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from memoryadmin.agents.models import Agent, ProbeQuery
from memoryadmin.core import stores


def run(*args: str) -> dict:
    out = StringIO()
    call_command("import_locomo", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


@pytest.mark.django_db
def test_it_imports_a_conversation_and_rerun_changes_nothing(locomo_file, unique_name):
    prefix = unique_name("lc") + "-"
    first = run(str(locomo_file), "--conversation", "conv-30", "--collection-prefix", prefix)
    [report] = first["conversations"]
    assert report["agent"] == "locomo-conv-30" and report["agent_created"] is True
    assert (report["turns"], report["observations"], report["summaries"]) == (369, 169, 19)
    assert report["written"] == 557 and report["probes_created"] == 81

    agent = Agent.objects.get(slug="locomo-conv-30")
    assert agent.collection_name == f"{prefix}locomo-conv-30"
    assert agent.schedule_enabled is False
    store = stores.get_store(agent)
    assert store.count() == 557
    [turn] = store.get(["conv-30:D1:1"], include_embeddings=True)
    assert turn.document.startswith("Gina: Hey Jon!")
    assert turn.metadata["layer"] == "episodic" and turn.metadata["session"] == 1
    assert turn.metadata["evidence"] == ["D1:1"]
    assert turn.metadata["created_at"].endswith("+00:00")
    assert turn.embedding is not None and turn.embedding.shape == (384,)
    probe = ProbeQuery.objects.filter(agent=agent).order_by("id").first()
    assert probe.external_key == "conv-30:qa:0" and probe.answer and probe.category in (1, 2, 3, 4)

    again = run(str(locomo_file), "--conversation", "conv-30", "--collection-prefix", prefix)
    [report2] = again["conversations"]
    assert report2["agent_created"] is False
    assert (report2["written"], report2["unchanged"], report2["embedded"]) == (0, 557, 0)
    assert (report2["probes_created"], report2["probes_updated"]) == (0, 0)
    assert store.count() == 557
    assert ProbeQuery.objects.filter(agent=agent).count() == 81


@pytest.mark.django_db
def test_an_unknown_conversation_is_bad_input_and_writes_nothing(locomo_file):
    with pytest.raises(CommandError) as exc:
        call_command("import_locomo", str(locomo_file), "--conversation", "conv-99")
    assert exc.value.returncode == 2
    assert "conv-99" in str(exc.value)
    assert not Agent.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            b'[{"sample_id": "x", "conversation": {"session_1": '
            b'[{"speaker": "A", "dia_id": "D1:1", '
            b'"text": "hi"}], "session_1_date_time": "8 May 2023"}}]',
            "'8 May 2023'",
        ),
        (b'[{"sample_id": "x"', "not a LoCoMo JSON file"),
        (b'{"qa": []}', "expected a JSON list"),
    ],
)
def test_a_malformed_file_is_bad_input_and_writes_nothing(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(CommandError) as exc:
        call_command("import_locomo", str(path))
    assert exc.value.returncode == 2 and message in str(exc.value)
    assert not Agent.objects.exists()


@pytest.mark.django_db
def test_a_missing_file_is_bad_input(tmp_path):
    with pytest.raises(CommandError) as exc:
        call_command("import_locomo", str(tmp_path / "nope.json"))
    assert exc.value.returncode == 2 and "No such file" in str(exc.value)
