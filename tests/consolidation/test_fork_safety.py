"""Process-wide adapter state survives ``fork()``: the worker's parent (``run_worker``) resumes
passes with the embedder and the vector cache, then django-q2 forks its task processes, which
must embed and read the cache again without hanging.

Each scenario runs in a fresh interpreter with a timeout, so a deadlock fails the test instead
of hanging the suite (the bug: the embedder's thread pool, created in the parent, has no
threads in the child, and ``embed()`` waited on it forever).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from consolidation.adapters.embedder import EmbedderUnavailable, get_default_embedder

# Enough texts of different lengths for several batches (64 texts / 512 tokens a batch).
_SCRIPT_HEAD = """
import multiprocessing, sys
import numpy as np
from consolidation.adapters.embedder import get_default_embedder
from consolidation.adapters.vector_cache import VectorCache

TEXTS = [f"memory {i}: " + "the user walked the dog in the park " * (1 + i % 9) for i in range(120)]
"""


def _run(script: str, tmp_path: Path, timeout: float = 150.0) -> subprocess.CompletedProcess:
    try:
        get_default_embedder()
    except EmbedderUnavailable as exc:  # pragma: no cover - the weights are a dev dependency
        pytest.skip(str(exc))
    code = _SCRIPT_HEAD + textwrap.dedent(script)
    try:
        return subprocess.run(
            [sys.executable, "-c", code],
            cwd=Path(__file__).resolve().parents[2],
            env=None,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(
            f"the forked child hung (killed after {timeout:g} s): {exc.stderr!r}"
        ) from exc


def test_it_embeds_in_a_child_forked_after_the_parent_embedded(tmp_path: Path) -> None:
    result = _run(
        """
        emb = get_default_embedder()
        parent = emb.embed(TEXTS)

        def child(queue):
            out = get_default_embedder().embed(TEXTS)
            queue.put(float(np.abs(out - parent).max()))

        ctx = multiprocessing.get_context("fork")
        queue = ctx.Queue()
        procs = [
            ctx.Process(target=child, args=(queue,), daemon=True) for _ in range(2)
        ]
        for p in procs:
            p.start()
        diffs = [queue.get(timeout=90) for _ in procs]
        for p in procs:
            p.join(20)
        print("children", [p.exitcode for p in procs], "max diff", max(diffs))
        # The parent keeps working after the fork too.
        assert np.allclose(emb.embed(TEXTS), parent, atol=1e-6)
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    line = result.stdout.strip().splitlines()[-1]
    assert line.startswith("children [0, 0] max diff"), result.stdout
    assert float(line.rsplit(" ", 1)[1]) < 1e-5


def test_it_forces_threads_so_the_pool_is_used(tmp_path: Path) -> None:
    """The same fork with an explicit 2-thread embedder (one core available must not hide the
    bug: the pool is only used when ``threads > 1``)."""
    result = _run(
        """
        from consolidation.adapters.embedder import OnnxMiniLMEmbedder
        emb = OnnxMiniLMEmbedder(threads=2)
        parent = emb.embed(TEXTS)
        ctx = multiprocessing.get_context("fork")
        queue = ctx.Queue()
        p = ctx.Process(target=lambda q: q.put(emb.embed(TEXTS).shape), args=(queue,), daemon=True)
        p.start()
        print("child", queue.get(timeout=90))
        p.join(20)
        print("exit", p.exitcode)
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["child", "(120,", "384)", "exit", "0"]


def test_it_uses_the_vector_cache_in_a_forked_child(tmp_path: Path) -> None:
    path = tmp_path / "vectors.sqlite3"
    result = _run(
        f"""
        cache = VectorCache({str(path)!r})
        embed = get_default_embedder().embed
        parent = cache.embed(TEXTS[:40], embed)

        def child(queue):
            out = cache.embed(TEXTS, embed)  # 40 cached, 80 new
            queue.put((out.shape, float(np.abs(out[:40] - parent).max())))

        ctx = multiprocessing.get_context("fork")
        queue = ctx.Queue()
        p = ctx.Process(target=child, args=(queue,), daemon=True)
        p.start()
        shape, diff = queue.get(timeout=90)
        p.join(20)
        # The child's rows are in the file: the parent finds all 120 without embedding.
        again = cache.embed(TEXTS, lambda missing: (_ for _ in ()).throw(AssertionError(missing)))
        print(p.exitcode, shape, diff < 1e-6, again.shape)
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0 (120, 384) True (120, 384)"
