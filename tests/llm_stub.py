"""A real, local OpenAI-compatible HTTP server for tests of the LLM paths.

``StubLLM`` runs the stdlib ``http.server`` in a daemon thread on ``127.0.0.1:<free port>`` and
serves ``POST /v1/chat/completions`` and ``POST /v1/embeddings`` (any other path → 404).
Replies come from a FIFO script of steps pushed by the test; when the script is empty the
``default`` step is used (an empty ``{"facts": []}`` answer). Every request is recorded (path,
headers, decoded JSON body) in :attr:`StubLLM.requests`, in arrival order, *before* it is
answered.

Scripted steps:

- :meth:`StubLLM.push_facts` — a valid chat completion whose content is ``{"facts": [...]}``;
- :meth:`StubLLM.push_content` — a completion with arbitrary content text (malformed JSON,
  schema-violating JSON, prose …);
- :meth:`StubLLM.push_status` — an HTTP error (e.g. 500) with an OpenAI-style error body, and
  a ``Retry-After`` header when asked (a 429 from a rate-limited hosted model);
- :meth:`StubLLM.push_echo` — the reply a small local model gives when it does not follow the
  prompt: the quoted input repeated, cut at ``cut_at`` characters with ``finish_reason`` =
  ``"length"``;
- :meth:`StubLLM.push_slow` — sleep ``seconds`` before answering (the client's read timeout
  fires first); the sleep is interruptible, so teardown never waits for it;
- :meth:`StubLLM.push_trickle` — send headers at once, then one body byte every ``interval``
  seconds for ``seconds`` (per-read timeouts never fire; only a total deadline stops it);
- :meth:`StubLLM.respond_with` — a callable ``(request_body: dict) -> content str``, used for
  every request until replaced (for answers that cite the ids actually sent).

Like a real server, the stub reports ``usage`` (prompt tokens = UTF-8 bytes of the messages
/ 4, completion tokens = bytes of the reply / 4, rounded up; a scripted step may fix them) and
honours ``max_tokens``: a reply longer than ``max_tokens`` tokens is cut there and answered
with ``finish_reason: "length"``. Two settings make it behave like a given server:

- :attr:`StubLLM.refuse_formats` — ``response_format`` forms it answers with HTTP 400 (or
  :attr:`StubLLM.format_status`): ``"json_schema"``, ``"json_object_schema"`` (``json_object``
  with a ``schema``, llama-cpp-python's form), ``"json_object"``;
- :attr:`StubLLM.context_tokens` — a request whose prompt tokens plus ``max_tokens`` exceed it
  is refused with HTTP 400 in llama-cpp-python's words ("Requested tokens (N) exceed context
  window of M").

Embeddings: every input text gets :func:`tests.agent_stores.foreign_vector` of width
:attr:`StubLLM.embedding_dim` (1536, OpenAI ``text-embedding-3-small``'s; the request's
``dimensions`` wins when given) — the same vectors the mem0/PraisonAI fixtures store, so an
agent embedding a text through the stub gets the vector the library would have written.
A scripted :meth:`StubLLM.push_status` step answers an embeddings request too.

Use it from any test file with the ``llm_stub`` fixture (or ``with StubLLM() as stub:``)::

    pytest_plugins = ["tests.llm_stub"]

    def test_it_talks(llm_stub):
        llm_stub.push_facts([{"text": "…", "evidence": ["a"], "confidence": 0.9}])
        writer = LLMWriter(llm_stub.base_url, "test-key", "stub-model", timeout_seconds=2)

No mocks: the ``openai`` SDK (httpx2 underneath) talks HTTP to this server over loopback.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

__all__ = ["RecordedRequest", "StubLLM", "llm_stub"]

Responder = Callable[[dict[str, Any]], str]


@dataclass
class RecordedRequest:
    """One request the stub received: ``path``, lower-cased ``headers`` and JSON ``body``."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The chat ``messages`` list of the request (empty when absent)."""
        return list((self.body or {}).get("messages") or [])

    def message(self, role: str) -> str:
        """Concatenated content of the messages with this ``role`` ("system" / "user")."""
        return "\n".join(str(m.get("content", "")) for m in self.messages if m.get("role") == role)


@dataclass
class _Step:
    kind: str  # "content" | "status" | "slow" | "trickle" | "echo"
    content: str = ""
    status: int = 200
    seconds: float = 0.0
    interval: float = 0.5
    extra: dict[str, Any] = field(default_factory=dict)


def _tokens(text: str) -> int:
    """The stub's token count of ``text``: UTF-8 bytes / 4, rounded up."""
    return -(-len(text.encode("utf-8")) // 4)


def _format_name(body: dict[str, Any]) -> str | None:
    fmt = body.get("response_format")
    if not isinstance(fmt, dict):
        return None
    if fmt.get("type") == "json_object" and "schema" in fmt:
        return "json_object_schema"
    return str(fmt.get("type"))


def _completion(
    content: str,
    model: str,
    n: int,
    finish_reason: str = "stop",
    usage: tuple[int, int] = (1, 1),
) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-stub-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason,
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": usage[0] + usage[1],
        },
    }


def _b64(vector: list[float]) -> str:
    import base64
    import struct

    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")


class StubLLM:
    """The scripted OpenAI-compatible server; see the module docstring.

    Attributes: ``base_url`` (``"http://127.0.0.1:<port>/v1"``, what ``LLMWriter`` takes),
    ``requests`` (list of :class:`RecordedRequest`), ``refuse_formats``, ``format_status`` and
    ``context_tokens`` (module docstring).
    """

    def __init__(self, embedding_dim: int = 1536) -> None:
        self.embedding_dim = embedding_dim
        self.refuse_formats: set[str] = set()
        self.format_status = 400
        self.context_tokens: int | None = None
        self.requests: list[RecordedRequest] = []
        self._script: deque[_Step] = deque()
        self._responder: Responder | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    # lifecycle -----------------------------------------------------------------------------
    @property
    def port(self) -> int:
        """The TCP port the server listens on (chosen by the OS)."""
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """Base URL for an OpenAI client: ``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> StubLLM:
        """Start serving in a daemon thread; returns ``self``."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, wake sleeping handlers and close the socket (returns promptly)."""
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> StubLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # scripting -----------------------------------------------------------------------------
    def push_facts(self, facts: list[dict[str, Any]], **extra: Any) -> None:
        """Answer the next request with content ``{"facts": facts, **extra}`` (valid JSON)."""
        self.push_content(json.dumps({"facts": facts, **extra}))

    def push_content(
        self,
        content: str,
        *,
        finish_reason: str = "stop",
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
    ) -> None:
        """Answer the next request with a completion whose message content is ``content``
        (``usage`` computed unless given)."""
        extra = {
            "finish_reason": finish_reason,
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
        }
        self._push(_Step("content", content=content, extra=extra))

    def push_status(
        self, status: int, message: str = "stub error", *, retry_after: float | None = None
    ) -> None:
        """Answer the next request with HTTP ``status`` and an OpenAI-style error body (and a
        ``Retry-After: <seconds>`` header when ``retry_after`` is given)."""
        extra = {} if retry_after is None else {"retry_after": retry_after}
        self._push(_Step("status", status=status, content=message, extra=extra))

    def push_echo(self, cut_at: int | None = 300) -> None:
        """Answer the next request with the JSON quoted in its user message (what is between
        ``<memories>`` and ``</memories>``), cut at ``cut_at`` characters with
        ``finish_reason`` "length" (``None``: whole, "stop")."""
        self._push(_Step("echo", seconds=float(cut_at or 0)))

    def push_slow(self, seconds: float, content: str = '{"facts": []}') -> None:
        """Sleep ``seconds`` (interruptible at teardown) before answering with ``content``."""
        self._push(_Step("slow", seconds=seconds, content=content))

    def push_trickle(self, seconds: float, interval: float = 0.3) -> None:
        """Send 200 headers, then one space every ``interval`` s for ``seconds`` s, then close."""
        self._push(_Step("trickle", seconds=seconds, interval=interval))

    def respond_with(self, responder: Responder | None) -> None:
        """Use ``responder(request_body) -> content`` when the script is empty (None resets)."""
        with self._lock:
            self._responder = responder

    def _push(self, step: _Step) -> None:
        with self._lock:
            self._script.append(step)

    def _next_step(self, body: dict[str, Any] | None) -> _Step:
        with self._lock:
            if self._script:
                return self._script.popleft()
            responder = self._responder
        if responder is not None:
            return _Step("content", content=responder(body or {}))
        return _Step("content", content='{"facts": []}')

    # HTTP ----------------------------------------------------------------------------------
    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return  # keep pytest output clean

            def _send_json(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 (http.server naming)
                self._send_json(404, {"error": {"message": "not found", "type": "stub"}})

            def do_POST(self) -> None:  # noqa: N802 (http.server naming)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"null")
                except ValueError:
                    body = None
                with stub._lock:
                    stub.requests.append(
                        RecordedRequest(
                            path=self.path,
                            headers={k.lower(): v for k, v in self.headers.items()},
                            body=body if isinstance(body, dict) else None,
                        )
                    )
                try:
                    if self.path.rstrip("/") == "/v1/embeddings":
                        self._embeddings(body if isinstance(body, dict) else {})
                        return
                    if self.path.rstrip("/") != "/v1/chat/completions":
                        self._send_json(404, {"error": {"message": "not found", "type": "stub"}})
                        return
                    refused = self._refusal(body) if isinstance(body, dict) else None
                    if refused is not None:  # the scripted step answers the next request
                        self._error(refused[0], refused[1], {})
                        return
                    self._answer(stub._next_step(body if isinstance(body, dict) else None), body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout) — expected in timeout tests

            def _embeddings(self, body: dict[str, Any]) -> None:
                from tests.agent_stores import foreign_vector

                with stub._lock:
                    step = stub._script.popleft() if stub._script else None
                if step is not None and step.kind == "status":
                    self._send_json(
                        step.status, {"error": {"message": step.content, "type": "server_error"}}
                    )
                    return
                texts = body.get("input")
                texts = [texts] if isinstance(texts, str) else list(texts or [])
                dim = int(body.get("dimensions") or stub.embedding_dim)
                as_b64 = body.get("encoding_format") == "base64"  # the SDK's default encoding
                vectors = [foreign_vector(t, dim) for t in texts]
                data = [
                    {"object": "embedding", "index": i, "embedding": _b64(v) if as_b64 else v}
                    for i, v in enumerate(vectors)
                ]
                self._send_json(
                    200,
                    {
                        "object": "list",
                        "data": data,
                        "model": str(body.get("model") or "stub-embed"),
                        "usage": {"prompt_tokens": 1, "total_tokens": 1},
                    },
                )

            def _error(self, status: int, message: str, headers: dict[str, str]) -> None:
                data = json.dumps(
                    {"error": {"message": message, "type": "server_error", "code": None}}
                ).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def _refusal(self, body: dict[str, Any]) -> tuple[int, str] | None:
                """A refusal the server settings ask for: response_format, context."""
                fmt = _format_name(body)
                if fmt is not None and fmt in stub.refuse_formats:
                    return stub.format_status, f"response_format type {fmt!r} is not supported"
                if stub.context_tokens is not None:
                    asked = _tokens(json.dumps(body.get("messages") or []))
                    asked += int(body.get("max_tokens") or 0)
                    if asked > stub.context_tokens:
                        return 400, (
                            f"Requested tokens ({asked}) exceed context window of "
                            f"{stub.context_tokens}"
                        )
                return None

            def _reply(self, step: _Step, body: dict[str, Any], model: str, n: int) -> None:
                content = step.content
                finish = step.extra.get("finish_reason", "stop")
                if step.kind == "echo":
                    user = next(
                        (
                            m.get("content", "")
                            for m in body.get("messages") or []
                            if m.get("role") == "user"
                        ),
                        "",
                    )
                    start, end = user.find("<memories>\n"), user.rfind("\n</memories>")
                    content = user[start + len("<memories>\n") : end] if start >= 0 else user
                    if step.seconds:
                        content, finish = content[: int(step.seconds)], "length"
                limit = body.get("max_tokens")
                if isinstance(limit, int) and _tokens(content) > limit:
                    content, finish = (
                        content.encode("utf-8")[: limit * 4].decode("utf-8", "ignore"),
                        "length",
                    )
                usage = (
                    step.extra.get("prompt_tokens") or _tokens(json.dumps(body.get("messages"))),
                    step.extra.get("completion_tokens") or _tokens(content),
                )
                self._send_json(200, _completion(content, model, n, finish, usage))

            def _answer(self, step: _Step, body: Any) -> None:
                body = body if isinstance(body, dict) else {}
                model = str(body.get("model") or "stub-model")
                n = len(stub.requests)
                if step.kind == "slow":
                    if stub._stop.wait(step.seconds):
                        return
                    self._reply(step, body, model, n)
                elif step.kind == "status":
                    wait = step.extra.get("retry_after")
                    self._error(
                        step.status,
                        step.content,
                        {} if wait is None else {"Retry-After": f"{wait:g}"},
                    )
                elif step.kind == "trickle":
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", "1000000")
                    self.end_headers()
                    deadline = time.monotonic() + step.seconds
                    while time.monotonic() < deadline and not stub._stop.is_set():
                        self.wfile.write(b" ")
                        self.wfile.flush()
                        stub._stop.wait(step.interval)
                    self.close_connection = True
                else:
                    self._reply(step, body, model, n)

        return Handler


@pytest.fixture
def llm_stub() -> Iterator[StubLLM]:
    """A started :class:`StubLLM`, stopped after the test."""
    with StubLLM() as stub:
        yield stub
