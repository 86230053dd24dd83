"""Test helpers for forget requests: a mem0 store of two users (written by mem0's own code) with
an applied pass, an edit and a delete behind it; a census of one user's records; and the
search for a text in every place that can keep it (every text and JSON column of every
model, every Chroma collection, the vector cache, the files under ``var/``)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from django.apps import apps
from django.core.management import call_command
from django.db import models

from consolidation.adapters.vector_cache import text_key
from memoryadmin.agents.models import Agent
from memoryadmin.core import stores
from memoryadmin.memories.models import ForgetRequest
from memoryadmin.memories.services.forget import forget_approve
from memoryadmin.memories.services.memories import memory_delete, memory_set_pinned
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.services.review import pass_approve
from tests.agent_stores import Mem0Memory, write_mem0
from tests.proposals.test_services_passes import run_pass

ALICE = [
    "Alice moved to Hamburg in 2019 with her partner",
    "Alice moved to Hamburg in 2019 with her partner",
    "Alice is allergic to peanuts and carries a pen",
    "Alice works night shifts as a nurse at St. Georg",
]
ALICE_DELETED = "Alice's passport number is C01X00T47"
BOB = [
    "Bob prefers window seats on long flights",
    "Bob prefers window seats on long flights",
    "Bob is learning the cello with a private teacher",
]


def mem0_agent(unique_name: Any, capture: Any, user: Any) -> Agent:
    """A mem0 collection of users ``alice`` and ``bob`` attached as an agent, with an applied
    pass (each user's duplicate merged: archived copies), one of alice's memories pinned by an
    operator (its prior version archived) and one deleted (archived). (A text edit needs the
    collection's own embedder: the edit case is a plain agent's, in test_forget.py.)"""
    name = unique_name("mem0")
    mems = [Mem0Memory(t, user_id="alice") for t in [*ALICE, ALICE_DELETED]]
    mems += [Mem0Memory(t, user_id="bob") for t in BOB]
    write_mem0(stores.get_client(), name, mems)
    slug = unique_name("m0")
    call_command("attach_collection", slug, name, "--json", stdout=_Null())
    agent = Agent.objects.get(slug=slug)
    agent.policy = {"max_loss_fraction": 0.5}
    agent.save()
    run = run_pass(agent, capture)
    assert run.status == Pass.Status.PROPOSED, run.status
    with capture(execute=True):
        pass_approve(run=run, user=user)
    run.refresh_from_db()
    assert run.status == Pass.Status.APPLIED, run.status
    store = stores.get_store(agent)
    recs = {r.document: r for r in store.iter_records(include_embeddings=False)}
    memory_set_pinned(agent=agent, memory_id=recs[ALICE[3]].id, pinned=True, user=user)
    memory_delete(agent=agent, memory_id=recs[ALICE_DELETED].id, user=user)
    return agent


def approve(capture: Any, request: ForgetRequest, user: Any, note: str = "") -> ForgetRequest:
    """Approve ``request`` as a reviewer and run what commits then: the worker's purge
    (django-q2 sync). Returns the request as it ended."""
    with capture(execute=True):
        forget_approve(request=request, user=user, note=note)
    request.refresh_from_db()
    return request


class _Null:
    def write(self, *_: Any) -> None:
        pass

    def flush(self) -> None:
        pass


def user_census(agent: Agent, user_id: str) -> tuple[int, str]:
    """(count, SHA-256) over the ids, stored documents, metadata and stored vector bytes of the
    records of ``user_id``, sorted by id: equal exactly when that user's records are
    byte-identical."""
    rows = []
    for page in stores.get_store(agent).iter_stored():
        for r, emb in page:
            if r.metadata.get("user_id") == user_id:
                meta = json.dumps(r.metadata, sort_keys=True, ensure_ascii=False)
                rows.append((r.id, r.document, meta, bytes(emb)))
    rows.sort()
    h = hashlib.sha256()
    for rid, doc, meta, emb in rows:
        for part in (rid.encode(), doc.encode(), meta.encode(), emb):
            h.update(len(part).to_bytes(8, "big") + part)
    return len(rows), h.hexdigest()


def database_traces(texts: list[str]) -> list[str]:
    """``model.field #pk`` of every text or JSON column, of every installed model, whose value
    holds one of ``texts``."""
    found = []
    for model in apps.get_models():
        cols = [
            f
            for f in model._meta.concrete_fields
            if isinstance(f, models.CharField | models.TextField | models.JSONField)
        ]
        if not cols:
            continue
        for row in model.objects.all().values("pk", *[f.attname for f in cols]):
            for f in cols:
                value = row[f.attname]
                blob = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                if any(t in (blob or "") for t in texts):
                    found.append(f"{model.__name__}.{f.name} #{row['pk']}")
    return found


def chroma_traces(texts: list[str]) -> list[str]:
    """Collections of the in-process Chroma whose documents or metadata hold one of ``texts``."""
    client = stores.get_client()
    found = []
    for col in client.list_collections():
        col = client.get_collection(col.name if hasattr(col, "name") else col)
        got = col.get(include=["documents", "metadatas"])
        blob = json.dumps([got["documents"], got["metadatas"]], ensure_ascii=False)
        found += [f"{col.name}: {t[:20]}" for t in texts if t in blob]
    return found


def cache_traces(texts: list[str]) -> int:
    """Rows of the vector cache (ours and native tables) keyed by one of ``texts``."""
    cache = stores.vector_cache()
    keys = [text_key(t) for t in texts]
    db = cache._conn
    ours = [f"{cache.model_tag}:{k}" for k in keys]
    n = 0
    for k in ours:
        n += db.execute("SELECT count(*) FROM ours WHERE key = ?", (k,)).fetchone()[0]
    for k in keys:
        n += db.execute("SELECT count(*) FROM native WHERE key = ?", (k,)).fetchone()[0]
    return n


def file_traces(root: Path, texts: list[str]) -> list[str]:
    """Files under ``root`` whose bytes hold one of ``texts`` (UTF-8)."""
    found = []
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            found += [str(path) for t in texts if t.encode() in data]
    return found
