"""An OpenAI-compatible embeddings endpoint: the collection's own embedder for attached stores.

mem0 and PraisonAI store vectors from another model (OpenAI ``text-embedding-3-small``, 1536-d,
by default). A memory with a new text (a merge that rewrites, a distillation) can be written to
such a collection only with a vector from that model; this client asks the endpoint that
serves it (``POST {base_url}/embeddings``: OpenAI, vLLM, Ollama's ``/v1``, LiteLLM …). Without
one, those operations are left out of the plan (``consolidation.adapters.chroma_store``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import openai

from .embedder import EmbedderUnavailable
from .endpoints import check_endpoint_url, check_key_env, hosts_from_env

__all__ = ["EndpointEmbedder", "endpoint_embedder_from_config"]

_BATCH = 256  # inputs per request: OpenAI accepts 2,048; smaller keeps requests ~1 MB


class EndpointEmbedder:
    """Embeds texts through an OpenAI-compatible ``/embeddings`` endpoint.

    Args:
        base_url: endpoint root with the API prefix, e.g. ``"https://api.openai.com/v1"``.
        model: model name sent with each request (e.g. ``"text-embedding-3-small"``).
        api_key: bearer token (``None`` for local endpoints that need none).
        timeout_seconds: limit per request (finite, > 0).

    :meth:`embed` returns ``(n, d) float32`` in input order. Any failure (connection refused,
    timeout, HTTP error, an answer of the wrong length or with non-finite values) raises
    :class:`~consolidation.adapters.embedder.EmbedderUnavailable` naming the endpoint, with
    the key redacted.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        timeout_seconds: float = 30.0,
    ) -> None:
        parts = urlsplit(base_url or "")
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"embedder base URL must be http(s)://host[:port]/…, got {base_url!r}")
        if not (model or "").strip():
            raise ValueError("embedder model must be named")
        if not (
            isinstance(timeout_seconds, int | float)
            and math.isfinite(timeout_seconds)
            and timeout_seconds > 0
        ):
            raise ValueError(f"embedder timeout must be a positive number, got {timeout_seconds!r}")
        self.base_url = base_url.rstrip("/")
        self.model = model.strip()
        self._api_key = api_key or None
        self._client = openai.OpenAI(
            base_url=self.base_url,
            api_key=self._api_key or "unused",
            timeout=float(timeout_seconds),
            max_retries=1,
        )

    def __repr__(self) -> str:
        return f"EndpointEmbedder({self.base_url!r}, {self.model!r})"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), d) float32`` vectors from the endpoint (module docstring for errors)."""
        texts = list(texts)
        out: list[np.ndarray] = []
        for start in range(0, len(texts), _BATCH):
            chunk = texts[start : start + _BATCH]
            try:
                resp = self._client.embeddings.create(
                    model=self.model, input=chunk, encoding_format="float"
                )
            except openai.OpenAIError as exc:
                message = str(exc).replace(self._api_key, "***") if self._api_key else str(exc)
                raise EmbedderUnavailable(
                    f"embeddings endpoint {self.base_url} ({self.model}) failed: {message}"
                ) from exc
            rows = sorted(resp.data, key=lambda d: d.index)
            vecs = np.asarray([r.embedding for r in rows], dtype=np.float32)
            if vecs.ndim != 2 or len(vecs) != len(chunk) or not np.all(np.isfinite(vecs)):
                raise EmbedderUnavailable(
                    f"embeddings endpoint {self.base_url} ({self.model}) answered "
                    f"{len(rows)} vectors for {len(chunk)} texts or non-finite values"
                )
            out.append(vecs)
        return np.concatenate(out) if out else np.zeros((0, 0), dtype=np.float32)

    def close(self) -> None:
        """Release the HTTP connection pool."""
        self._client.close()


def endpoint_embedder_from_config(
    config: Mapping[str, Any] | None,
    env: Mapping[str, str],
    *,
    allowed_key_env: Iterable[str] | None = None,
    allowed_hosts: Iterable[str] | None = None,
) -> EndpointEmbedder | None:
    """The embedder an agent's ``embedder`` setting names, or ``None`` when it names none.

    ``config``: ``{"base_url": …, "model": …, "api_key_env": "OPENAI_API_KEY"}``; the key itself
    is never stored, only the name of the environment variable holding it (read from ``env``).
    The variable must be one the deployment allows and never a service secret
    (``allowed_key_env``, default ``endpoints.DEFAULT_KEY_ENV_ALLOWED``), the URL http(s) on an
    allowed host (``allowed_hosts``, default ``env``'s ``ENDPOINT_HOSTS_ALLOWED``; empty: any):
    :mod:`consolidation.adapters.endpoints`, checked here on every use, not only when stored.
    Raises ``ValueError`` for a half-filled or invalid setting; reads no key then.
    """
    config = dict(config or {})
    base_url = str(config.get("base_url") or "").strip()
    model = str(config.get("model") or "").strip()
    if not base_url and not model:
        return None
    if not base_url or not model:
        raise ValueError("an embedder needs both a base URL and a model")
    hosts = hosts_from_env(env) if allowed_hosts is None else allowed_hosts
    base_url = check_endpoint_url(base_url, hosts, what="embedder")
    key_env = str(config.get("api_key_env") or "").strip()
    if key_env:
        key_env = check_key_env(key_env, allowed_key_env)
    return EndpointEmbedder(base_url, model, (env.get(key_env) or None) if key_env else None)
