"""Chroma write cost by batch size: upserts and deletes of 3,000 records into a 30K collection of
a ``chroma run`` server started here (a temporary directory; stopped at the end), in batches of
100 and of 1,000 operations alternately, three rounds. Each upsert batch is preceded by a read of
its ids' metadata, as ``ChromaMemoryStore.upsert`` does. Prints the server's
``get_max_batch_size()`` and one line per round and batch size (wall seconds, load average).

    .venv/bin/python bench/chroma_batch_bench.py

Measured (chromadb 1.5.9, 2-core box, load average 2.6–3.3; apply's batch is
settings.APPLY_BATCH): max_batch_size 5,461; upsert of 3,000 records 5.9 / 7.2 / 9.1 s in
batches of 100 and 6.0 / 7.0 / 8.9 s in batches of 1,000 (the server's per-record cost, growing
with the collection: the batch size does not change it); delete of 3,000 1.67–1.70 s in batches
of 100, 0.57–0.62 s in batches of 1,000 (≈ 3× fewer seconds).
"""

import os
import socket
import subprocess
import sys
import tempfile
import time

import chromadb
import numpy as np

s = socket.socket()
s.bind(("127.0.0.1", 0))
port = s.getsockname()[1]
s.close()
tmp = tempfile.mkdtemp(prefix="chroma-batch-")
path = os.path.join(tmp, "data")
log = open(os.path.join(tmp, "log"), "wb")  # noqa: SIM115
p = subprocess.Popen(
    [
        os.path.join(os.path.dirname(sys.executable), "chroma"),
        "run",
        "--path",
        path,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ],
    stdout=log,
    stderr=log,
)
try:
    for _ in range(60):
        try:
            c = chromadb.HttpClient(host="127.0.0.1", port=port)
            c.heartbeat()
            break
        except Exception:
            time.sleep(1)
    print("max_batch_size", c.get_max_batch_size(), flush=True)
    col = c.get_or_create_collection("bench-batch", metadata={"hnsw:space": "cosine"})
    rng = np.random.default_rng(0)
    n = 30000
    x = rng.standard_normal((n, 384)).astype(np.float32)
    for s0 in range(0, n, 5000):
        col.add(
            ids=[f"m{i}" for i in range(s0, s0 + 5000)],
            embeddings=x[s0 : s0 + 5000],
            documents=[f"doc {i}" for i in range(s0, s0 + 5000)],
            metadatas=[{"k": i} for i in range(s0, s0 + 5000)],
        )
    print("setup done", flush=True)
    m = 3000
    nxt = 0
    for rep in range(3):
        for b in (100, 1000):
            y = rng.standard_normal((m, 384)).astype(np.float32)
            ids = [f"u{nxt + i}" for i in range(m)]
            nxt += m
            t = time.perf_counter()
            for s0 in range(0, m, b):
                col.get(ids=ids[s0 : s0 + b], include=["metadatas"])
                col.upsert(
                    ids=ids[s0 : s0 + b],
                    embeddings=y[s0 : s0 + b],
                    documents=[f"new {i}" for i in range(b)],
                    metadatas=[{"k": 1}] * b,
                )
            tu = time.perf_counter() - t
            dels = [
                f"m{i}"
                for i in range(rep * 6000 + (b == 1000) * 3000, rep * 6000 + (b == 1000) * 3000 + m)
            ]
            t = time.perf_counter()
            for s0 in range(0, m, b):
                col.delete(ids=dels[s0 : s0 + b])
            td = time.perf_counter() - t
            print(
                f"rep {rep} batch {b}: upsert {m} {tu:.2f} s, delete {m} {td:.2f} s, "
                f"load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
finally:
    p.terminate()
    p.wait()
