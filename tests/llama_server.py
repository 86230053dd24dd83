"""A real local model server for the LLM tests and bench: llama-cpp-python's OpenAI-compatible
server over the Gemma 3 270M model that ``make test-llm`` puts in ``var/models/``.

Nothing here builds or downloads anything: :func:`missing` says what is absent (so a test can
skip with the reason), and :class:`LlamaServer` starts ``python -m llama_cpp.server`` on a free
loopback port, waits until it answers, and stops it (its process only) on exit.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODEL = REPO / "var" / "models" / "gemma-3-270m-q4_k_m.gguf"
MODEL_ALIAS = "gemma-3-270m-q4_k_m"
CONTEXT_TOKENS = 4096
"""The context the server is started with (``--n_ctx``); the policy's ``llm_context_tokens``."""


def missing() -> str | None:
    """Why the real model cannot be used here (``None`` when it can)."""
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed in this venv (run `make test-llm`)"
    if (
        importlib.util.find_spec("llama_cpp.server") is None
        or importlib.util.find_spec("uvicorn") is None
    ):
        return "llama-cpp-python was installed without its [server] extra (run `make test-llm`)"
    if not MODEL.exists():
        return f"the Gemma 3 270M model is not at {MODEL} (run `make test-llm`)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LlamaServer:
    """``with LlamaServer() as server: server.base_url`` — the running server's ``/v1`` root.

    ``threads`` (default 2: this machine's cores), ``context`` (tokens), ``log`` (its output).
    Raises ``RuntimeError`` with the log's tail when it does not answer within ``start_timeout``
    seconds.
    """

    def __init__(
        self,
        *,
        threads: int = 2,
        context: int = CONTEXT_TOKENS,
        start_timeout: float = 180.0,
        log: Path | None = None,
    ) -> None:
        self.port = _free_port()
        self.threads, self.context, self.start_timeout = threads, context, start_timeout
        self.log = log or REPO / "var" / "log" / f"llama-server-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> LlamaServer:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        cmd = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(MODEL),
            "--model_alias",
            MODEL_ALIAS,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.context),
            "--n_threads",
            str(self.threads),
        ]
        out = self.log.open("wb")
        self.proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=dict(os.environ)
        )
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as r:
                    if json.load(r).get("data"):
                        return self
            except (OSError, urllib.error.URLError, ValueError):
                time.sleep(0.5)
        self.__exit__()
        tail = self.log.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"llama.cpp server did not start on port {self.port}:\n{tail}")

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
