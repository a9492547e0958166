"""Local HTTP servers that speak the OpenAI and Anthropic wire formats, for tests.

Each server listens on 127.0.0.1 on an ephemeral port, answers from a scripted
queue of replies (a default success once the queue is empty), records every
request it received and counts how many were in flight at once. The real SDK
clients talk to it over real HTTP, so retries, timeouts, headers and error
mapping are exercised exactly as against the real services.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

Flavor = Literal["openai", "anthropic"]

# Small server-directed retry delay: both SDKs honour retry-after-ms (in ms) before
# their own exponential backoff, which keeps retry tests fast.
FAST_RETRY = {"retry-after-ms": "1"}


@dataclass
class Reply:
    """One scripted answer. ``status`` 200 with ``body`` None builds a success body."""

    status: int = 200
    text: str = "ok"
    body: Any = None  # dict → JSON, str → sent as is (e.g. malformed JSON)
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # sleep before answering (longer than the client timeout → a timeout)
    input_tokens: int = 11
    output_tokens: int = 7


def rate_limited() -> Reply:
    return Reply(429, body=_error_body(429, "rate_limit_error", "Rate limit reached"), headers=dict(FAST_RETRY))


def server_error() -> Reply:
    return Reply(500, body=_error_body(500, "api_error", "Internal server error"), headers=dict(FAST_RETRY))


def unauthorized() -> Reply:
    return Reply(401, body=_error_body(401, "authentication_error", "invalid x-api-key"))


def model_not_found(model: str) -> Reply:
    return Reply(404, body=_error_body(404, "not_found_error", f"model: {model}"))


def bad_request(message: str) -> Reply:
    return Reply(400, body=_error_body(400, "invalid_request_error", message))


def slow(delay_s: float, text: str = "late") -> Reply:
    return Reply(delay_s=delay_s, text=text)


def _error_body(status: int, kind: str, message: str) -> dict[str, Any]:
    # Shaped so both SDKs find the message: OpenAI reads error.message, Anthropic error.message too.
    return {"type": "error", "error": {"type": kind, "message": message, "code": status}}


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]  # lower-cased names
    body: dict[str, Any]


class ScriptedLLMServer:
    """An OpenAI- or Anthropic-compatible endpoint on 127.0.0.1 with scripted replies."""

    def __init__(self, flavor: Flavor, *, default_delay_s: float = 0.0) -> None:
        self.flavor = flavor
        self.default_delay_s = default_delay_s
        self.requests: list[RecordedRequest] = []
        self.max_in_flight = 0
        self._in_flight = 0
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._ids = itertools.count(1)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name=f"{flavor}-test-server", daemon=True
        )

    # -- lifecycle ------------------------------------------------------------------

    def start(self) -> ScriptedLLMServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; idempotent, and prompt even while a handler sleeps through a delay."""
        if self._stopping.is_set():
            return
        self._stopping.set()  # wakes handlers sleeping through a scripted delay
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    @property
    def root_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def base_url(self) -> str:
        """What a client is configured with: ``/v1`` included for OpenAI, not for Anthropic."""
        return self.root_url + "/v1" if self.flavor == "openai" else self.root_url

    # -- script ---------------------------------------------------------------------

    def enqueue(self, *replies: Reply) -> None:
        with self._lock:
            self._replies.extend(replies)

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self.requests)

    def _next_reply(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            if self._replies:
                return self._replies.popleft()
            return Reply(delay_s=self.default_delay_s)

    def _done(self) -> None:
        with self._lock:
            self._in_flight -= 1

    # -- wire formats -----------------------------------------------------------------

    def success_body(self, request: RecordedRequest, reply: Reply) -> dict[str, Any]:
        model = request.body.get("model", "unknown")
        n = next(self._ids)
        if self.flavor == "openai":
            return {
                "id": f"chatcmpl-{n}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": reply.text}, "finish_reason": "stop"}
                ],
                "usage": {
                    "prompt_tokens": reply.input_tokens,
                    "completion_tokens": reply.output_tokens,
                    "total_tokens": reply.input_tokens + reply.output_tokens,
                },
            }
        return {
            "id": f"msg_{n}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": reply.text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens},
        }

    @property
    def endpoint(self) -> str:
        return "/v1/chat/completions" if self.flavor == "openai" else "/v1/messages"


def _handler_for(server: ScriptedLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {"_unparsed": raw.decode("utf-8", "replace")}
            request = RecordedRequest(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            if self.path != server.endpoint:
                self._send(404, {"error": {"message": f"no route {self.path}"}}, {})
                return
            reply = server._next_reply(request)
            try:
                if reply.delay_s and server._stopping.wait(reply.delay_s):
                    return
                payload = reply.body
                if reply.status == 200 and payload is None:
                    payload = server.success_body(request, reply)
                self._send(reply.status, payload, reply.headers)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout) before we answered
            finally:
                server._done()

        def _send(self, status: int, payload: Any, headers: dict[str, str]) -> None:
            data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

    return Handler
