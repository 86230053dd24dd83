"""A Chroma server (or the token proxy in front of it, deploy/nginx-chroma.conf) that refuses the
token: the adapter raises ``StoreAccessDenied`` (a ``StoreUnavailable``) saying so, already when
the client is made. A local stub answers every request with Chroma's JSON error body; the real
proxy is exercised by tests/core/test_chroma_token.py."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from consolidation.adapters.chroma_store import StoreAccessDenied, StoreUnavailable, make_client


@pytest.fixture
def refusing_server(request: pytest.FixtureRequest) -> Iterator[int]:
    """A server answering ``request.param`` = (status, Chroma error name) to everything."""
    status, error = request.param
    body = json.dumps({"error": error, "message": "no valid token"}).encode()

    class Refuse(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_POST = do_GET

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(
    ("refusing_server", "status"),
    [((401, "AuthorizationError"), 401), ((403, "AuthError"), 403)],
    indirect=["refusing_server"],
)
def test_a_refused_token_is_access_denied_with_the_status(refusing_server, status) -> None:
    with pytest.raises(StoreAccessDenied, match=f"refused the token \\(HTTP {status}\\)") as err:
        make_client(host="127.0.0.1", port=refusing_server, token="wrong")
    assert isinstance(err.value, StoreUnavailable)  # callers that handle "unavailable" still do
    assert "connect to 127.0.0.1" in str(err.value)
