"""LLM calls for processes that must not hold the API key: a relay on 127.0.0.1 that adds it.

``kernelopt bench`` runs each problem's search in a worker that also runs the problem's code, which
kernelopt did not write; that worker gets the LLM's address as this relay's and a token of the
bench's own, never the key. The relay checks the token, puts the real key in its place and forwards
the request to the provider as it came (the SDKs speak to it as to the provider). What code in a
problem worker can do with the token is bounded: it works only while the bench runs, only through
this relay, and only for ``max_requests`` requests and, where given, ``max_usd`` dollars (read from
each answer's token counts at the config's prices), after which the relay refuses with 402 (no SDK
retries that). Under a dollar cap each request is admitted only where its worst case fits what is
left beside the requests still in flight: its body's bytes as input tokens (a token is at least one
byte of the text it stands for) and its ``max_tokens`` as output, so answers arriving together cannot
carry the spending past the cap; a request without ``max_tokens`` is refused there (400). The key stays in the bench process, which other processes of its user cannot read
(``workers.hardening``); a worker running as root could read it anyway, so as root the bench's
problem workers (which keep the bench's user) are trusted with it as with everything else.

The standard library's ``ThreadingHTTPServer`` and ``urllib``: a relay of whole requests (the SDKs'
calls here do not stream) needs nothing more, and the SDKs' own HTTP clients differ between versions.
"""

from __future__ import annotations

import json
import secrets
import threading
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kernelopt.agents.llm_errors import LLMSetupError
from kernelopt.agents.prices import PriceTable
from kernelopt.agents.providers.keys import ApiKey
from kernelopt.agents.providers.spec import LLMConfig, ProviderSpec

DEFAULT_MAX_REQUESTS = 5000
# Not forwarded either way: hop-by-hop headers, those the HTTP client sets itself, and the credentials.
_DROPPED = frozenset(
    {
        "host", "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te", "trailer",
        "content-length", "content-encoding", "accept-encoding", "authorization", "x-api-key", "api-key",
    }
)  # fmt: skip


@dataclass(frozen=True)
class RelayAccess:
    """What a worker is handed: the provider's kind and model, the relay's address as the base URL,
    the token, and the client settings of the bench's LLM config. Never the key."""

    kind: str
    model: str
    url: str
    token: str
    max_concurrency: int
    timeout_s: float
    max_retries: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RelayAccess:
        return cls(**data)

    def spec(self) -> ProviderSpec:
        return ProviderSpec(self.kind, self.model, self.url)  # type: ignore[arg-type]

    def config(self) -> LLMConfig:
        return LLMConfig(max_concurrency=self.max_concurrency, timeout_s=self.timeout_s, max_retries=self.max_retries)

    def key(self) -> ApiKey:
        return ApiKey(self.token, None)


class KeyRelay:
    """The relay for one provider (``spec``, its ``key``): ``with KeyRelay(...) as relay`` serves until
    the block ends; :attr:`access` is what a worker gets."""

    def __init__(
        self,
        spec: ProviderSpec,
        key: ApiKey,
        upstream: str,
        config: LLMConfig,
        max_requests: int = DEFAULT_MAX_REQUESTS,
        max_usd: float | None = None,
    ) -> None:
        if max_requests < 1 or (max_usd is not None and not max_usd > 0):
            raise LLMSetupError(
                f"the relay's caps must be positive: {max_requests} requests, {max_usd} dollars; raise them"
            )
        self.prices = PriceTable(config.prices)
        if max_usd is not None and self.prices.lookup(spec.model) is None:
            raise LLMSetupError(
                f'a dollar cap needs the price of {spec.model}: add [prices."{spec.model}"] to the LLM config '
                "(USD per million tokens) or leave the cap out"
            )
        self.spec, self.upstream, self.max_requests = spec, upstream.rstrip("/"), max_requests
        self.max_usd, self.spent_usd = max_usd, 0.0
        self.reserved_usd = 0.0  # the worst cases of the requests in flight, under a dollar cap
        self.token = secrets.token_urlsafe(32)
        self.requests = 0
        self._key, self._config = key, config
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="kernelopt-llm-relay", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def access(self) -> RelayAccess:
        return RelayAccess(
            self.spec.kind,
            self.spec.model,
            self.url,
            self.token,
            self._config.max_concurrency,
            self._config.timeout_s,
            self._config.max_retries,
        )

    def __enter__(self) -> KeyRelay:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def admit(self, headers: dict[str, str], body: bytes = b"") -> tuple[int, str] | float | None:
        """For a request that carries the token and fits the caps: None, or under a dollar cap the
        worst-case cost reserved for it (give it back with :meth:`settle`); else the status and why."""
        bearer = headers.get("authorization", "").removeprefix("Bearer ").strip()
        given = (bearer or headers.get("x-api-key", "")).encode("utf-8", "surrogateescape")
        if not secrets.compare_digest(given, self.token.encode()):
            return 401, "this relay needs the bench's token"
        worst: float | None = None
        if self.max_usd is not None:
            bound = self.worst_case(body)
            if isinstance(bound, tuple):
                return bound
            worst = bound
        with self._lock:
            if self.requests >= self.max_requests:
                return 402, f"the bench's LLM relay allows {self.max_requests} requests, all used"
            if self.max_usd is not None and worst is not None:
                committed = self.spent_usd + self.reserved_usd
                if committed + worst > self.max_usd:
                    return 402, (
                        f"the bench's LLM relay has spent ${self.spent_usd:.2f} of its ${self.max_usd:.2f} "
                        f"(${self.reserved_usd:.2f} more in flight); this request could cost ${worst:.2f}"
                    )
                self.reserved_usd += worst
            self.requests += 1
        return worst

    def worst_case(self, body: bytes) -> float | tuple[int, str]:
        """The most a request can cost at the config's prices: its body's bytes as input tokens, its
        ``max_tokens`` (``max_completion_tokens``) as output; a request without one is 400. A request
        without a body (a model list) generates nothing: 0."""
        if not body:
            return 0.0
        try:
            request = json.loads(body)
        except ValueError:
            request = None
        limit = None
        if isinstance(request, dict):
            limit = request.get("max_completion_tokens", request.get("max_tokens"))
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            return 400, "a dollar-capped relay admits only requests that set max_tokens (their worst case is its bound)"
        return self.prices.cost(self.spec.model, len(body), limit) or 0.0

    def settle(self, reserved: float | None, content: bytes | None) -> None:
        """Give back a request's reservation and charge its answer (``content``, None for none)."""
        if reserved:
            with self._lock:
                self.reserved_usd = max(0.0, self.reserved_usd - reserved)
        if content is not None:
            self.charge(content)

    def credentials(self) -> dict[str, str]:
        """The provider's own authentication header with the real key (a keyless local server gets the
        placeholder it would get without the relay)."""
        if self.spec.kind == "anthropic":
            return {"x-api-key": self._key.value}
        return {"authorization": f"Bearer {self._key.value}"}

    def charge(self, content: bytes) -> None:
        """Add an answer's cost (its ``usage`` token counts, in either wire format, at the config's prices)."""
        try:
            answer = json.loads(content)
        except ValueError:
            return
        usage = answer.get("usage") if isinstance(answer, dict) else None
        if not isinstance(usage, dict):
            return
        tokens_in = int(usage.get("prompt_tokens", usage.get("input_tokens", 0)) or 0)
        tokens_out = int(usage.get("completion_tokens", usage.get("output_tokens", 0)) or 0)
        cost = self.prices.cost(str(answer.get("model") or self.spec.model), tokens_in, tokens_out)
        if cost is None:
            cost = self.prices.cost(self.spec.model, tokens_in, tokens_out) or 0.0
        with self._lock:
            self.spent_usd += cost

    def forward(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        """The provider's answer to the request as it came, with the key in place of the token; an error
        status is an answer too (the SDK maps and retries it as it would the provider's own)."""
        sent = {k: v for k, v in headers.items() if k not in _DROPPED}
        request = urllib.request.Request(
            self.upstream + path, data=body if body else None, headers={**sent, **self.credentials()}, method=method
        )
        try:
            with urllib.request.urlopen(request, timeout=self._config.timeout_s) as reply:
                return reply.status, _kept(reply.headers.items()), reply.read()
        except urllib.error.HTTPError as error:
            return error.code, _kept(error.headers.items()), error.read()


def _handler(relay: KeyRelay) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _relay(self) -> None:
            headers = {k.lower(): v for k, v in self.headers.items()}
            body = self.rfile.read(int(headers.get("content-length") or 0))
            admitted = relay.admit(headers, body)
            if isinstance(admitted, tuple):
                status, why = admitted
                self._send(status, {"content-type": "application/json"}, _error(status, why))
                return
            answer = None
            try:
                status, kept, content = relay.forward(self.command, self.path, headers, body)
                answer = content if status == 200 else None
            except Exception as exc:  # the provider unreachable: the SDK sees a 502 and retries as for one
                self._send(502, {"content-type": "application/json"}, _error(502, f"relay: {type(exc).__name__}"))
                return
            finally:
                relay.settle(admitted, answer)
            self._send(status, kept, content)

        def _send(self, status: int, headers: dict[str, str], content: bytes) -> None:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("content-length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

        do_POST = do_GET = _relay  # http.server's names

        def log_message(self, *args: Any) -> None:  # no line per request on the bench's console
            return

    return Handler


def _kept(headers: Any) -> dict[str, str]:
    return {k: v for k, v in headers if k.lower() not in _DROPPED}


def _error(status: int, message: str) -> bytes:
    return json.dumps({"type": "error", "error": {"type": "relay_error", "message": message, "code": status}}).encode()
