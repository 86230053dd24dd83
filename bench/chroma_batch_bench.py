"""Chroma write cost by batch size and by call: upserts and deletes of 3,000 records into an
N-record collection (default 30K) of a ``chroma run`` server started here (a temporary
directory; stopped at the end), in batches of 100 and of 1,000 operations alternately, three
rounds. Each write batch is preceded by a read of its ids' metadata, as
``ChromaMemoryStore.upsert`` does. In the 1,000 rounds, also: ``add`` of 3,000 new ids (what
``ChromaMemoryStore.upsert`` does with ids absent at its read) and ``upsert`` over 3,000
existing ids with new vectors, and a metadata-only ``update`` of 3,000 existing ids (no vector,
no document: what ``ChromaMemoryStore.upsert`` writes for a record that already holds the
document and vector, e.g. a merge kept in one source's record), after the read of documents,
metadata and vectors it makes first (that read also timed alone, and without vectors). Prints the
server's ``get_max_batch_size()`` and one line per round and batch size (wall seconds, load
average).

    .venv/bin/python bench/chroma_batch_bench.py [N]   # N stored records, default 30,000

Measured (chromadb 1.5.9, 2-core box, load average 2.6–3.3; apply's batch is
settings.APPLY_BATCH): max_batch_size 5,461; upsert of 3,000 records 5.9 / 7.2 / 9.1 s in
batches of 100 and 6.0 / 7.0 / 8.9 s in batches of 1,000 (the server's per-record cost, growing
with the collection: the batch size does not change it); delete of 3,000 1.67–1.70 s in batches
of 100, 0.57–0.62 s in batches of 1,000 (≈ 3× fewer seconds).

At N = 200,000 (2026-12-06, load 1.6–1.7), batches of 1,000, three rounds: upsert of 3,000 new
ids 4.51 / 4.56 / 5.04 s, add of 3,000 new ids 4.12 / 4.49 / 4.74 s (1–9 % less, measured
after the upsert each round, on a larger collection), upsert over 3,000 existing ids 8.74 /
8.20 / 8.52 s (1.7–1.9×: why a merge whose text is new writes it under a new id rather than
overwrite a source; one that keeps a source's text keeps that record and updates its metadata
alone, below), delete of 3,000 0.69–0.89 s.

At N = 30,000 (2026-12-07, load 1.3–1.6), batches of 1,000, three rounds: upsert of 3,000 new
ids 1.82 / 2.42 / 2.85 s, upsert over 3,000 existing ids 5.52 / 5.82 / 4.47 s, a metadata-only
update of 3,000 existing ids 0.18 s each round (≈ 10× cheaper than any write of a vector),
delete of 3,000 0.26–0.27 s. Again later that morning (load 0.8–1.5), with the read of
documents, metadata and vectors before each update batch: update 0.38–0.45 s (the read alone
0.18–0.19 s, 0.03 s without vectors), upsert over 3,000 existing 6.63–8.72 s.
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
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 30000
    x = rng.standard_normal((n, 384)).astype(np.float32)
    for s0 in range(0, n, 5000):
        col.add(
            ids=[f"m{i}" for i in range(s0, s0 + 5000)],
            embeddings=x[s0 : s0 + 5000],
            documents=[f"doc {i}" for i in range(s0, s0 + 5000)],
            metadatas=[{"k": i} for i in range(s0, s0 + 5000)],
        )
    print("setup done", n, flush=True)
    m = 3000
    FULL = ["documents", "metadatas", "embeddings"]
    nxt = 0
    gone = 0  # ids m0.. deleted so far

    def timed(fn):
        t = time.perf_counter()
        fn()
        return time.perf_counter() - t

    for rep in range(3):
        for b in (100, 1000):
            y = rng.standard_normal((m, 384)).astype(np.float32)
            ids = [f"u{nxt + i}" for i in range(m)]
            nxt += m

            def upsert(ids=ids, y=y, b=b, write=col.upsert):
                for s0 in range(0, m, b):
                    col.get(ids=ids[s0 : s0 + b], include=["metadatas"])
                    write(
                        ids=ids[s0 : s0 + b],
                        embeddings=y[s0 : s0 + b],
                        documents=[f"new {i}" for i in range(b)],
                        metadatas=[{"k": 1}] * b,
                    )

            tu = timed(upsert)
            line = f"rep {rep} batch {b}: upsert of {m} new ids {tu:.2f} s"
            if b == 1000:  # what ChromaMemoryStore.upsert does with ids absent at its read
                ids = [f"u{nxt + i}" for i in range(m)]
                nxt += m
                ta = timed(lambda ids=ids: upsert(ids=ids, write=col.add))
                # over existing ids with new vectors (why a merge with a new text gets a new id)
                over = [f"m{i}" for i in range(n - m, n)]
                to = timed(lambda over=over: upsert(ids=over))
                line += f", add of {m} new ids {ta:.2f} s, upsert over {m} existing {to:.2f} s"
                # metadata only, over existing ids: what ChromaMemoryStore.upsert writes for a
                # stored record that already holds the document and vector (a merge kept in one
                # source's record), after its read of documents, metadata and vectors
                meta = [f"m{i}" for i in range(n - 2 * m, n - m)]

                def update(meta=meta, b=b):
                    for s0 in range(0, m, b):
                        col.get(ids=meta[s0 : s0 + b], include=FULL)
                        col.update(ids=meta[s0 : s0 + b], metadatas=[{"k": 2}] * b)

                def read(include, meta=meta, b=b):
                    for s0 in range(0, m, b):
                        col.get(ids=meta[s0 : s0 + b], include=include)

                line += f", metadata-only update of {m} existing {timed(update):.2f} s"
                line += f" (its reads: {timed(lambda: read(FULL)):.2f} s with vectors,"
                line += f" {timed(lambda: read(['metadatas'])):.2f} s metadata only)"
            dels = [f"m{i}" for i in range(gone, gone + m)]
            gone += m
            td = timed(
                lambda dels=dels, b=b: [col.delete(ids=dels[s0 : s0 + b]) for s0 in range(0, m, b)]
            )
            print(f"{line}, delete {m} {td:.2f} s, load {os.getloadavg()[0]:.1f}", flush=True)
finally:
    p.terminate()
    p.wait()
