"""The int8 product of :mod:`consolidation.planning.quantized`, run by onnxruntime.

numpy multiplies integer matrices without BLAS (≈ 1 G multiply-adds a second); onnxruntime's
``MatMulInteger`` runs MLAS's 8-bit kernels, which use AVX-512 VNNI where the CPU has it. On
this machine's AMD EPYC, one core, ``(4096, 384) × (384, 1000)``, measured
(``bench/plan_bench.py --n 1000000`` prints the incremental pass it speeds up):

- ``uint8`` left side with zero point 128 × ``int8`` right side: 705 G multiply-adds a second;
- ``int8 × int8``: 46 G (no fast kernel for a signed left side here);
- numpy's float32 product of the same shape at the head's 161 columns: ≈ 100 GFLOP/s.

Machines of this kind differ: on another (AMD EPYC of family 25, model 17: Zen 4, whose
AVX-512 runs on 256-bit units), the same products ran at 153–206 G multiply-adds a second in
int8 (onnxruntime 1.24.4 and 1.32.0 alike) and 52 GFLOP/s in float32, so there the int8
product is ≈ 3–4× float32's, not 7× (measured 2026-12-07, ``bench/plan_bench.py`` prints
the box's ``blas_s``).

So the left side is the codes + 128 (:func:`~consolidation.planning.quantized.quantize`) and
the graph subtracts the zero point; the result is exact (integer arithmetic, ``int32``).
onnxruntime is already what the offline embedder runs on (:mod:`.embedder`); the planner takes
this product as an argument (:class:`~consolidation.planning.quantized.Int8Product`), so the
engine core never imports onnxruntime.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from typing import Any

import numpy as np

from .forking import forget_after_fork

__all__ = ["OnnxInt8Product", "int8_product"]


class OnnxInt8Product:
    """An :class:`~consolidation.planning.quantized.Int8Product`: ``(m, d) uint8`` (codes +
    128) × ``(d, k) int8`` → ``(m, k) int32``, one onnxruntime session on one thread per call
    (the caller shares blocks over the CPUs; onnxruntime releases the GIL in ``run``, and a
    session may be run from several threads at once). The session is built at the first call,
    and again in a forked child (onnxruntime does not support a session across ``fork()``).
    ``out`` (``(m, k) int32``, C-contiguous): the product is written there (a large result
    the caller frees after use; without it onnxruntime's arena keeps the largest result's
    memory for the process's life: a 1M plan's probe, 4,096 × 4,899 a thread, raised its peak
    RSS by ≈ 130 MB). Raises ``ImportError`` naming the package when onnxruntime or onnx is
    missing, ``ValueError`` for an ``out`` that does not fit (and onnxruntime's for shapes that
    do not)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._session: Any = None
        forget_after_fork(self)

    def _after_fork_in_child(self) -> None:
        self._session = None
        self._lock = threading.Lock()

    def _get_session(self) -> Any:
        with self._lock:
            if self._session is None:
                self._session = _new_session()
            return self._session

    def __call__(self, a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        session = self._get_session()
        if out is None:  # onnxruntime's arena holds the result's memory for later calls
            return np.asarray(session.run(None, {"A": a, "B": b})[0], dtype=np.int32)
        if out.shape != (a.shape[0], b.shape[1]) or out.dtype != np.int32:
            raise ValueError(f"out must be int32 of shape {(a.shape[0], b.shape[1])}")
        if not out.flags.c_contiguous:
            raise ValueError("out must be C-contiguous")
        binding = session.io_binding()
        binding.bind_cpu_input("A", np.ascontiguousarray(a))
        binding.bind_cpu_input("B", np.ascontiguousarray(b))
        binding.bind_output("Y", "cpu", 0, np.int32, out.shape, out.ctypes.data)
        session.run_with_iobinding(binding)
        return out


def _new_session() -> Any:
    """A one-node graph: ``MatMulInteger(A uint8, B int8, zero point of A = 128)``."""
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper
    except ImportError as exc:  # pragma: no cover - dependencies in pyproject.toml
        raise ImportError("the int8 product needs the 'onnxruntime' and 'onnx' packages") from exc
    a = helper.make_tensor_value_info("A", TensorProto.UINT8, ["m", "d"])
    b = helper.make_tensor_value_info("B", TensorProto.INT8, ["d", "k"])
    y = helper.make_tensor_value_info("Y", TensorProto.INT32, ["m", "k"])
    zero = helper.make_tensor("A_zero", TensorProto.UINT8, [], [128])
    node = helper.make_node("MatMulInteger", ["A", "B", "A_zero"], ["Y"])
    graph = helper.make_graph([node], "int8_product", [a, b], [y], initializer=[zero])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8  # what every onnxruntime ≥ 1.18 (pyproject.toml) reads
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(
        model.SerializeToString(), sess_options=so, providers=["CPUExecutionProvider"]
    )


@lru_cache(maxsize=1)
def int8_product() -> OnnxInt8Product:
    """The process's :class:`OnnxInt8Product` (its session is built at the first product)."""
    return OnnxInt8Product()
