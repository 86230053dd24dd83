"""Hand-built embeddings with known cosines for fast planning tests."""

from __future__ import annotations

import math

import numpy as np

DIM = 384


def basis(k: int) -> np.ndarray:
    """Unit vector along axis ``k`` (``(384,) float32``)."""
    v = np.zeros(DIM, np.float32)
    v[k] = 1.0
    return v


def at_cosine(base_axis: int, cos: float, other_axis: int) -> np.ndarray:
    """Unit vector with cosine ``cos`` to ``basis(base_axis)``, leaning on ``other_axis``."""
    return (cos * basis(base_axis) + math.sqrt(max(0.0, 1 - cos * cos)) * basis(other_axis)).astype(
        np.float32
    )


def rotated(theta: float) -> np.ndarray:
    """Unit vector in the (0, 1) plane at angle ``theta`` from axis 0."""
    return (math.cos(theta) * basis(0) + math.sin(theta) * basis(1)).astype(np.float32)


def random_unit(rng: np.random.Generator, n: int) -> np.ndarray:
    """``(n, 384) float32`` random unit rows (pairwise cosine ≈ 0 ± 0.05)."""
    x = rng.standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)
