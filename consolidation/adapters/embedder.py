"""Offline all-MiniLM-L6-v2 sentence embedder: onnxruntime + tokenizers, no torch, no network.

The model is Chroma's own default (``ONNXMiniLM_L6_V2``): a 6-layer BERT encoder (hidden 384,
12 heads, GELU/erf, LayerNorm eps 1e-12, vocab 30,522), mean-pooled over the attention mask and
L2-normalised, inputs truncated to 256 tokens (``[CLS]`` and ``[SEP]`` included) exactly as
Chroma's stock function does. Vectors from this module are interchangeable with vectors Chroma
computed for stores created with its default embedding function (cosine ≥ 0.999, see
``tests/consolidation/test_embedder.py``).

Model files (the weights' source, the ONNX graph built from them, the cache directory)
come from :mod:`consolidation.adapters.onnx_graph`.

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

import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import numpy as np

from .forking import forget_after_fork
from .onnx_graph import (
    DEFAULT_MODEL_DIR,
    GRAPH_VERSION,
    MODEL_DIR_ENV,
    TOKENIZER_FILE,
    EmbedderUnavailable,
    build_onnx_model,
    ensure_model_files,
    prepare_chroma_stock_layout,
    resolve_model_dir,
    source_model_dir,
)

if TYPE_CHECKING:
    import onnxruntime as ort

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
    concurrent calls). Fork-safe: a child process forked after the instance was used rebuilds
    its thread pool and onnxruntime session on first use (:mod:`.forking`; the pool copied from
    the parent has no threads, so embedding with it waited forever).
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
        from tokenizers import Tokenizer

        self.model_dir = resolve_model_dir(model_dir)
        self.batch_size = batch_size
        self.max_batch_tokens = max_batch_tokens
        self.threads = threads or min(_available_cores(), 8)
        onnx_path = ensure_model_files(self.model_dir)

        tokenizer = Tokenizer.from_file(str(self.model_dir / TOKENIZER_FILE))
        # tokenizer.json fixes truncation and padding at 128; Chroma truncates at 256 and we pad
        # per batch ourselves.
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        tokenizer.no_padding()
        self._tokenizer = tokenizer

        self._onnx_path = onnx_path
        self._session: ort.InferenceSession | None = self._new_session()
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        forget_after_fork(self)

    def _new_session(self) -> ort.InferenceSession:
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Parallelism is across batches (see embed); per-op threading measured slower here.
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.log_severity_level = 3
        return ort.InferenceSession(
            str(self._onnx_path), sess_options=so, providers=["CPUExecutionProvider"]
        )

    def _after_fork_in_child(self) -> None:
        # Only the forking thread survives fork(): the pool's workers are gone (and a lock held
        # by one of them stays held), and onnxruntime does not support using a session across
        # fork. Drop both without closing them; they are rebuilt on first use.
        self._pool = None
        self._session = None
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
        session = self._get_session()
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
            (hidden,) = session.run(
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

    def _get_session(self) -> ort.InferenceSession:
        with self._pool_lock:
            if self._session is None:
                self._session = self._new_session()
            return self._session

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


def _reset_default_lock() -> None:
    global _default_lock
    _default_lock = threading.Lock()  # another parent thread may have held it during fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_default_lock)


def get_default_embedder() -> OnnxMiniLMEmbedder:
    """The process-wide embedder (built on first call, then shared): the one embedder factory.

    Uses :func:`resolve_model_dir` (``$MEMORYADMIN_MODEL_DIR`` or the user cache dir) as read on
    the first call. Raises :class:`EmbedderUnavailable` when the weights are not installed.
    """
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = OnnxMiniLMEmbedder()
    return _default
