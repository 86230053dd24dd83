"""OnnxMiniLMEmbedder: equal to Chroma's stock all-MiniLM-L6-v2, batched, offline, cached."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import platformdirs
import pytest

from consolidation.adapters import embedder as embedder_module
from consolidation.adapters.embedder import (
    EMBEDDING_DIM,
    MAX_TOKENS,
    MODEL_DIR_ENV,
    OnnxMiniLMEmbedder,
    build_onnx_model,
    ensure_model_files,
    get_default_embedder,
    prepare_chroma_stock_layout,
    resolve_model_dir,
    source_model_dir,
)
from consolidation.protocols import Embedder

LONG_TEXT = " ".join(
    f"Sentence {i} of a long diary entry about hiking, cooking and the weather in Lisbon."
    for i in range(40)
)  # ~600 tokens: truncated at 256

TEXTS: list[str] = [
    "",
    " ",
    "a",
    "Hi!",
    "I like dogs",
    "I love dogs",
    "The stock market crashed",
    "Caroline went to the LGBTQ support group yesterday.",
    "Melanie painted a sunrise over the lake last year.",
    "My favourite food is sushi, but I also enjoy a good paella.",
    "Remember to buy milk, eggs and bread on the way home.",
    "The meeting was moved from Tuesday to Thursday at 3 pm.",
    "user prefers dark mode in the editor",
    "The user's dog is called Biscuit and is a golden retriever.",
    "What did you do last weekend?",
    "I went camping with my family near the mountains.",
    "Python 3.11 introduced faster CPython and better error messages.",
    "def add(a, b):\n    return a + b",
    "SELECT id, name FROM users WHERE active = 1;",
    "1234567890 3.14159 2.71828",
    "!!! ??? ... --- ***",
    "naïve café résumé jalapeño",
    "東京は日本の首都です。",
    "Москва — столица России.",
    "مرحبا بالعالم",
    "नमस्ते दुनिया",
    "🙂🚀🔥 emoji only text 🎉",
    "Ünïcödé with combining e\u0301 accents",
    "tab\tseparated\tvalues and\nnew lines\r\n",
    "ALL CAPS SHOUTING ABOUT THE WEATHER",
    "mixed CASE words In A sentence",
    "https://example.com/path?query=1&other=two",
    "john.doe@example.com wrote an email",
    "The quick brown fox jumps over the lazy dog.",
    "A fast auburn fox leaps above a sleepy hound.",
    "Quantum entanglement links the states of two particles.",
    "She was born in 1987 in a small village in Portugal.",
    "He has two brothers and one sister.",
    "They adopted a cat from the shelter in March.",
    "Our team won the regional football championship.",
    "The recipe needs two cups of flour and one egg.",
    "I'm allergic to peanuts.",
    "Don't forget: the password changes every 90 days.",
    "word " * 300,  # many tokens of one word
    LONG_TEXT,
    LONG_TEXT + " And then something completely different happened at the very end.",
    "x" * 2000,  # one long unbroken string
    "The Eiffel Tower is in Paris.",
    "Paris is home to the Eiffel Tower.",
    "Bananas are rich in potassium.",
]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("models") / "all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def emb(model_dir: Path) -> OnnxMiniLMEmbedder:
    return OnnxMiniLMEmbedder(model_dir)


@pytest.fixture(scope="module")
def stock(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Chroma's own ONNXMiniLM_L6_V2, pointed at an offline copy of the model."""
    from chromadb.utils.embedding_functions.onnx_mini_lm_l6_v2 import ONNXMiniLM_L6_V2

    root = prepare_chroma_stock_layout(tmp_path_factory.mktemp("chroma-onnx"))
    ef = ONNXMiniLM_L6_V2(preferred_providers=["CPUExecutionProvider"])
    ef.DOWNLOAD_PATH = root
    return ef


@pytest.fixture(scope="module")
def ours(emb: OnnxMiniLMEmbedder) -> np.ndarray:
    return emb.embed(TEXTS)


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_it_implements_the_embedder_protocol(emb: OnnxMiniLMEmbedder) -> None:
    assert isinstance(emb, Embedder)
    assert emb.dim == EMBEDDING_DIM == 384


def test_it_matches_chromas_stock_function_on_varied_texts(ours: np.ndarray, stock: Any) -> None:
    theirs = np.asarray(stock(TEXTS), dtype=np.float32)
    assert theirs.shape == ours.shape == (len(TEXTS), 384)
    sims = (ours * theirs).sum(axis=1)
    worst = int(np.argmin(sims))
    assert sims.min() >= 0.999, f"text {worst} {TEXTS[worst][:40]!r}: cosine {sims[worst]}"


def test_it_returns_float32_unit_rows_in_input_order(
    emb: OnnxMiniLMEmbedder, ours: np.ndarray
) -> None:
    out = ours
    assert out.shape == (len(TEXTS), 384) and out.dtype == np.float32
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    for i in (0, 7, 22, len(TEXTS) - 1):
        assert cos(out[i], emb.embed([TEXTS[i]])[0]) > 0.9999


def test_it_returns_an_empty_matrix_for_no_texts(emb: OnnxMiniLMEmbedder) -> None:
    out = emb.embed([])
    assert out.shape == (0, 384) and out.dtype == np.float32


def test_it_is_deterministic_within_and_across_instances(
    emb: OnnxMiniLMEmbedder, ours: np.ndarray, model_dir: Path
) -> None:
    assert np.array_equal(emb.embed(TEXTS), ours)
    assert np.array_equal(OnnxMiniLMEmbedder(model_dir).embed(TEXTS), ours)


def test_it_gives_the_same_vector_alone_or_in_a_batch_with_longer_texts(model_dir: Path) -> None:
    small = OnnxMiniLMEmbedder(model_dir, batch_size=4)
    alone = np.stack([small.embed([t])[0] for t in TEXTS[:12]])
    mixed = small.embed([LONG_TEXT, *TEXTS[:12], "word " * 300])[1:13]
    for i in range(12):
        assert cos(alone[i], mixed[i]) >= 0.9999, TEXTS[i]


def test_it_truncates_at_256_tokens_like_chroma(emb: OnnxMiniLMEmbedder) -> None:
    ids = emb.tokenize([LONG_TEXT, "hello world"])
    assert len(ids[0]) == MAX_TOKENS and ids[0][0] == 101 and ids[0][-1] == 102  # [CLS] … [SEP]
    assert ids[1] == [101, 7592, 2088, 102]
    a, b = emb.embed([LONG_TEXT, TEXTS[45]])  # differs only after token 256
    assert cos(a, b) > 0.99999


def test_it_scores_paraphrases_above_unrelated_pairs(emb: OnnxMiniLMEmbedder) -> None:
    pairs = [
        (
            "The quick brown fox jumps over the lazy dog.",
            "A fast auburn fox leaps above a sleepy hound.",
            "Quantum entanglement links the states of two particles.",
        ),
        (
            "The Eiffel Tower is in Paris.",
            "Paris is home to the Eiffel Tower.",
            "Bananas are rich in potassium.",
        ),
        (
            "What did you do last weekend?",
            "How did you spend your Saturday and Sunday?",
            "The recipe needs two cups of flour and one egg.",
        ),
        (
            "The user's dog is called Biscuit.",
            "Biscuit is the name of the user's dog.",
            "Our team won the regional football championship.",
        ),
    ]
    for anchor, paraphrase, unrelated in pairs:
        a, p, u = emb.embed([anchor, paraphrase, unrelated])
        assert cos(a, p) > cos(a, u) + 0.3, (anchor, cos(a, p), cos(a, u))


def test_it_is_a_faithful_sentence_encoder(emb: OnnxMiniLMEmbedder) -> None:
    like, love, market = emb.embed(["I like dogs", "I love dogs", "The stock market crashed"])
    assert cos(like, love) > 0.8
    assert cos(like, market) < 0.5


def test_it_reproduces_a_published_all_minilm_l6_v2_vector(emb: OnnxMiniLMEmbedder) -> None:
    # First 10 dimensions of the normalised all-MiniLM-L6-v2 embedding of "a product" as
    # asserted by Debezium's EmbeddingsMiniLmL6V2Test (debezium-ai, computed with langchain4j's
    # fp32 ONNX export): an anchor independent of our graph and of Chroma's code.
    published = [
        -0.07157834,
        0.022438003,
        -0.0236557,
        -0.014294243,
        0.0048211957,
        0.020384153,
        0.20435654,
        0.057306267,
        0.05457874,
        -0.030588629,
    ]
    got = emb.embed(["a product"])[0][:10]
    assert np.abs(got - np.array(published, dtype=np.float32)).max() < 1e-5


def _numpy_bert(weights: dict[str, np.ndarray], ids: list[int]) -> np.ndarray:
    """A plain numpy BERT forward pass for one unpadded sequence: the reference for the graph."""
    w = {k: v.astype(np.float64) for k, v in weights.items() if v.dtype != np.int64}

    def ln(x: np.ndarray, p: str) -> np.ndarray:
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-12) * w[f"{p}.weight"] + w[f"{p}.bias"]

    def lin(x: np.ndarray, p: str) -> np.ndarray:
        return x @ w[f"{p}.weight"].T + w[f"{p}.bias"]

    n = len(ids)
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][:n]
        + w["embeddings.token_type_embeddings.weight"][0]
    )
    x = ln(x, "embeddings.LayerNorm")
    erf = np.vectorize(math.erf)
    for i in range(6):
        p = f"encoder.layer.{i}"
        q, k, v = (
            lin(x, f"{p}.attention.self.{n_}").reshape(n, 12, 32).transpose(1, 0, 2)
            for n_ in ("query", "key", "value")
        )
        s = q @ k.transpose(0, 2, 1) / math.sqrt(32)
        s = np.exp(s - s.max(-1, keepdims=True))
        ctx = (s / s.sum(-1, keepdims=True) @ v).transpose(1, 0, 2).reshape(n, 384)
        x = ln(lin(ctx, f"{p}.attention.output.dense") + x, f"{p}.attention.output.LayerNorm")
        h = lin(x, f"{p}.intermediate.dense")
        h = 0.5 * h * (1 + erf(h / math.sqrt(2)))
        x = ln(lin(h, f"{p}.output.dense") + x, f"{p}.output.LayerNorm")
    return x


def test_the_onnx_graph_computes_bert_exactly_as_a_numpy_reference(
    emb: OnnxMiniLMEmbedder, model_dir: Path
) -> None:
    import onnxruntime as ort
    from safetensors.numpy import load_file

    weights = load_file(str(source_model_dir() / "model.safetensors"))
    session = ort.InferenceSession(
        str(ensure_model_files(model_dir)), providers=["CPUExecutionProvider"]
    )
    seqs = emb.tokenize(["I like dogs", "Caroline went to the support group yesterday."])
    width = max(map(len, seqs))
    ids = np.zeros((2, width), dtype=np.int64)
    mask = np.zeros_like(ids)
    for r, s in enumerate(seqs):
        ids[r, : len(s)] = s
        mask[r, : len(s)] = 1
    (hidden,) = session.run(
        None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    )
    assert hidden.shape == (2, width, 384) and hidden.dtype == np.float32
    for r, s in enumerate(seqs):
        ref = _numpy_bert(weights, s)
        assert np.abs(hidden[r, : len(s)] - ref).max() < 2e-4


@pytest.mark.parametrize("bad", ["a single string", [1, 2], ["ok", None], [b"bytes"]])
def test_it_rejects_input_that_is_not_a_list_of_strings(emb: OnnxMiniLMEmbedder, bad: Any) -> None:
    with pytest.raises(TypeError):
        emb.embed(bad)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batch_size": 0}, "batch_size"),
        ({"max_batch_tokens": -1}, "max_batch_tokens"),
        ({"threads": 0}, "threads"),
        ({"threads": True}, "threads"),
    ],
)
def test_it_rejects_bad_settings(model_dir: Path, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        OnnxMiniLMEmbedder(model_dir, **kwargs)


# ---- model files ----------------------------------------------------------------------------


def test_it_builds_the_model_once_and_reuses_it(emb: OnnxMiniLMEmbedder, model_dir: Path) -> None:
    path = ensure_model_files(model_dir)
    stamp = path.stat().st_mtime_ns
    ensure_model_files(model_dir)
    OnnxMiniLMEmbedder(model_dir)
    assert path.stat().st_mtime_ns == stamp
    assert (model_dir / "tokenizer.json").is_file()
    assert not [p for p in model_dir.iterdir() if p.name.endswith(".tmp")]


def test_it_rebuilds_a_damaged_model_file(tmp_path: Path, emb: OnnxMiniLMEmbedder) -> None:
    directory = tmp_path / "m"
    path = ensure_model_files(directory)
    path.write_bytes(b"truncated garbage")
    fresh = OnnxMiniLMEmbedder(directory)
    assert cos(fresh.embed(["I like dogs"])[0], emb.embed(["I like dogs"])[0]) > 0.99999


def test_it_finds_the_model_dir_from_argument_env_or_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(MODEL_DIR_ENV, raising=False)
    expected = platformdirs.user_cache_path("memoryadmin") / "models" / "all-MiniLM-L6-v2"
    assert resolve_model_dir() == expected and expected.is_absolute()  # never the cwd
    monkeypatch.setenv(MODEL_DIR_ENV, str(tmp_path / "env"))
    assert resolve_model_dir() == tmp_path / "env"
    assert resolve_model_dir(tmp_path / "arg") == tmp_path / "arg"


def test_the_default_embedder_is_one_shared_instance(
    monkeypatch: pytest.MonkeyPatch, model_dir: Path, emb: OnnxMiniLMEmbedder
) -> None:
    monkeypatch.setattr(embedder_module, "_default", None)
    monkeypatch.setenv(MODEL_DIR_ENV, str(model_dir))
    first = get_default_embedder()
    assert first is get_default_embedder()
    assert first.model_dir == model_dir


def test_the_graph_uses_only_standard_onnx_ops_with_chromas_interface() -> None:
    model = build_onnx_model()
    assert {n.domain for n in model.graph.node} == {""}
    assert [i.name for i in model.graph.input] == ["input_ids", "attention_mask", "token_type_ids"]
    assert [o.name for o in model.graph.output] == ["last_hidden_state"]


@pytest.mark.slow
def test_concurrent_processes_building_the_model_never_see_a_partial_file(tmp_path: Path) -> None:
    directory = tmp_path / "race"
    code = (
        "import sys; from consolidation.adapters.embedder import OnnxMiniLMEmbedder as E;"
        "v = E(sys.argv[1]).embed(['I like dogs']); print(float(v[0] @ v[0]))"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(directory)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
        assert float(out) == pytest.approx(1.0, abs=1e-5)
    assert sorted(p.name for p in directory.iterdir()) == ["model.onnx", "tokenizer.json"]
