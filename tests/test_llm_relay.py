"""The bench's key relay (kernelopt.agents.relay): a problem worker's LLM calls reach the provider
through it with the bench's token, never the key; against local servers that speak the OpenAI and
Anthropic wire formats, through the real SDKs."""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from llm_servers import ScriptedLLMServer

from kernelopt.agents.factory import make_client
from kernelopt.agents.providers import ApiKey, LLMCallError, LLMConfig, LLMSetupError, ProviderSpec
from kernelopt.agents.relay import KeyRelay, RelayAccess
from kernelopt.agents.types import Message

KEYS = {"openai": "sk-real-openai-789", "anthropic": "sk-ant-real-012"}
MODELS = {"openai": "gpt-4o", "anthropic": "claude-haiku-4-5"}
CHAT = [Message("user", "Make this kernel faster.")]
CONFIG = LLMConfig(timeout_s=5.0, max_retries=0)


@pytest.fixture(params=["openai", "anthropic"])
def upstream(request: pytest.FixtureRequest) -> Iterator[ScriptedLLMServer]:
    server = ScriptedLLMServer(request.param).start()
    yield server
    server.stop()


def call(url: str, headers: dict[str, str], body: bytes | None) -> tuple[int, str]:
    """The status and text of one request to the relay, an error status included."""
    request = urllib.request.Request(url, data=body, headers=headers, method="POST" if body else "GET")
    try:
        with urllib.request.urlopen(request, timeout=5) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def relay_for(server: ScriptedLLMServer, max_requests: int = 10, variable: str | None = "THE_KEY") -> KeyRelay:
    spec = ProviderSpec(server.flavor, MODELS[server.flavor])  # type: ignore[arg-type]
    return KeyRelay(spec, ApiKey(KEYS[server.flavor], variable), server.base_url, CONFIG, max_requests)


def worker_client(access: RelayAccess) -> object:
    """What a problem worker builds from the access it is handed (bench_problem), through a dict."""
    handed = RelayAccess.from_dict(json.loads(json.dumps(access.to_dict())))
    return make_client(handed.spec(), config=handed.config(), api_key=handed.key(), cache=False)


def test_a_workers_call_reaches_the_provider_with_the_key_and_never_the_token(upstream, monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # the worker has no key of its own
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with relay_for(upstream) as relay:
        access = relay.access
        assert KEYS[upstream.flavor] not in json.dumps(access.to_dict())
        with worker_client(access) as client:  # type: ignore[attr-defined]
            assert client.complete(CHAT).text == "ok"
    (request,) = upstream.requests
    sent = json.dumps(request.headers)
    assert KEYS[upstream.flavor] in sent and access.token not in sent
    assert request.body["model"] == MODELS[upstream.flavor] and relay.requests == 1
    # the path the SDK asked the relay for, under the provider's base URL
    assert request.path == ("/v1/chat/completions" if upstream.flavor == "openai" else "/v1/messages")


def test_a_request_without_the_token_or_past_the_cap_is_refused_and_never_forwarded(upstream) -> None:
    header = "authorization" if upstream.flavor == "openai" else "x-api-key"
    with relay_for(upstream, max_requests=1) as relay:
        url = relay.url + ("/chat/completions" if upstream.flavor == "openai" else "/v1/messages")

        def post(token: str) -> tuple[int, str]:
            value = f"Bearer {token}" if header == "authorization" else token
            body = json.dumps({"model": MODELS[upstream.flavor], "messages": [], "max_tokens": 8}).encode()
            return call(url, {header: value, "content-type": "application/json"}, body)

        for wrong in ("", "guess", KEYS[upstream.flavor], "tökén"):
            status, text = post(wrong)
            assert status == 401 and "token" in json.loads(text)["error"]["message"]
        assert post(relay.token)[0] == 200
        status, text = post(relay.token)
        assert status == 402 and "allows 1 requests" in json.loads(text)["error"]["message"]
    assert len(upstream.requests) == 1 and relay.requests == 1


def test_a_keyless_local_server_gets_the_placeholder_it_gets_without_the_relay() -> None:
    server = ScriptedLLMServer("openai").start()
    try:
        spec = ProviderSpec("openai-compatible", "qwen2.5-coder", server.base_url)
        with (
            KeyRelay(spec, ApiKey("not-needed", None), server.base_url, CONFIG) as relay,
            worker_client(relay.access) as client,  # type: ignore[attr-defined]
        ):
            assert client.complete(CHAT).text == "ok"
        (request,) = server.requests
        assert request.headers["authorization"] == "Bearer not-needed"
    finally:
        server.stop()


def test_the_bench_reads_the_key_once_and_stops_before_any_problem_without_one(monkeypatch) -> None:
    from kernelopt.cli.bench_cmd import llm_relay

    with llm_relay(None, None, 10) as none:
        assert none is None
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(LLMSetupError, match="OPENAI_API_KEY is not set"), llm_relay("openai:gpt-4o", None, 10):
        pass
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    with llm_relay("openai:gpt-4o", None, 10) as access:
        assert access is not None and (access.kind, access.model) == ("openai", "gpt-4o")
        assert access.url.startswith("http://127.0.0.1:") and access.token != "sk-from-env"
        assert call(access.url + "/models", {}, None)[0] == 401  # serving, and guarded


def test_a_bench_problem_searches_with_the_llm_through_the_access_it_is_handed(monkeypatch, tmp_path) -> None:
    """bench_problem builds the worker's LLM from the relay access in its options: the relay's address
    as the provider's base URL, the token as its key, the bench's client settings."""
    from kernelopt.config import load_settings
    from kernelopt.errors import KerneloptError
    from kernelopt.pipeline import bench_problem

    given: dict[str, object] = {}

    def fake_optimize(path, store, **kwargs):
        given.update(kwargs)
        raise KerneloptError("stop here")

    monkeypatch.setattr(bench_problem, "optimize", fake_optimize)
    access = RelayAccess("anthropic", "claude-haiku-4-5", "http://127.0.0.1:9", "the-token", 3, 40.0, 1)
    settings = load_settings({"store": str(tmp_path / "k.db")}, env={})
    options = {"settings": settings.values(), "name": "level1/01_relu", "llm": access.to_dict()}
    row = bench_problem.bench_problem(str(tmp_path / "01_relu.py"), options)
    assert row["status"] == "run_error" and "the-token" not in json.dumps(row)
    assert given["llm"] == ProviderSpec("anthropic", "claude-haiku-4-5", "http://127.0.0.1:9")
    assert given["llm_key"] == ApiKey("the-token", None)
    assert given["llm_config"] == LLMConfig(max_concurrency=3, timeout_s=40.0, max_retries=1)


def test_a_dollar_cap_counts_each_answers_tokens_at_the_configs_prices(upstream) -> None:
    """Each answer's usage (either wire format) at the config's prices: past ``max_usd`` the relay refuses;
    a cap for a model without a price, or a cap of nothing, stops before the bench starts."""
    from llm_servers import Reply

    from kernelopt.agents.prices import ModelPrice

    model = MODELS[upstream.flavor]
    config = LLMConfig(timeout_s=5.0, max_retries=0, prices={model: ModelPrice(1.0, 3.0)})
    spec = ProviderSpec(upstream.flavor, model)  # type: ignore[arg-type]
    for _ in range(3):
        upstream.enqueue(Reply(input_tokens=1_000_000, output_tokens=100_000))  # $1.30 each
    with (
        KeyRelay(spec, ApiKey(KEYS[upstream.flavor], "K"), upstream.base_url, config, max_usd=2.0) as relay,
        worker_client(relay.access) as client,  # type: ignore[attr-defined]
    ):
        client.complete(CHAT)
        client.complete(CHAT)  # admitted at $1.30, spent $2.60 after
        # a refusal the SDK does not retry, and the search goes on without the agents' call
        with pytest.raises(LLMCallError, match=r"refused the request \(402\): .*spent \$2.60 of its \$2.00"):
            client.complete(CHAT)
    assert len(upstream.requests) == 2 and relay.spent_usd == pytest.approx(2.6)
    with pytest.raises(LLMSetupError, match="needs the price of no-such-model"):
        KeyRelay(ProviderSpec("openai", "no-such-model"), ApiKey("k", "K"), upstream.base_url, CONFIG, max_usd=1.0)
    with pytest.raises(LLMSetupError, match="must be positive"):
        KeyRelay(spec, ApiKey("k", "K"), upstream.base_url, config, max_usd=0.0)


def test_a_dollar_cap_reserves_each_requests_worst_case_so_answers_in_flight_cannot_pass_it(upstream) -> None:
    """Several workers' calls admitted together: each reserves its body's bytes as input tokens and its
    max_tokens as output at the config's prices, so the cap holds however their answers come back."""
    from kernelopt.agents.prices import ModelPrice

    model = MODELS[upstream.flavor]
    config = LLMConfig(timeout_s=5.0, max_retries=0, prices={model: ModelPrice(1.0, 3.0)})
    spec = ProviderSpec(upstream.flavor, model)  # type: ignore[arg-type]
    relay = KeyRelay(spec, ApiKey(KEYS[upstream.flavor], "K"), upstream.base_url, config, max_usd=1.0)
    headers = {"authorization": f"Bearer {relay.token}"}
    limit = "max_completion_tokens" if upstream.flavor == "openai" else "max_tokens"
    body = json.dumps({"model": model, limit: 200_000, "messages": [{"role": "user", "content": "x" * 1000}]}).encode()
    worst = (len(body) * 1.0 + 200_000 * 3.0) / 1e6  # $0.60 and a little
    first = relay.admit(headers, body)
    assert first == pytest.approx(worst) and relay.reserved_usd == pytest.approx(worst)
    refused = relay.admit(headers, body)  # $0.60 in flight + $0.60 could pass $1.00
    assert isinstance(refused, tuple) and refused[0] == 402
    assert "($0.60 more in flight); this request could cost $0.60" in refused[1] and relay.requests == 1
    small = json.dumps({"model": model, limit: 1000, "messages": [{"role": "user", "content": "x"}]}).encode()
    assert isinstance(relay.admit(headers, small), float)  # fits beside the one in flight
    relay.settle(first, None)  # an answer that never came (an error status): nothing charged, the room back
    assert relay.spent_usd == 0.0 and relay.reserved_usd == pytest.approx((len(small) + 3000) / 1e6)
    assert isinstance(relay.admit(headers, body), float)
    unbounded = json.dumps({"model": model, "messages": []}).encode()
    status, why = relay.admit(headers, unbounded)  # type: ignore[misc]
    assert status == 400 and "only requests that set max_tokens" in why
    assert relay.admit({"authorization": "Bearer nope"}, body) == (401, "this relay needs the bench's token")
    assert relay.admit(headers, b"") == 0.0  # a request without a body (a model list) generates nothing


def test_a_dollar_capped_relay_gives_back_each_reservation_once_the_answer_is_in(upstream) -> None:
    from llm_servers import Reply

    from kernelopt.agents.prices import ModelPrice

    model = MODELS[upstream.flavor]
    config = LLMConfig(timeout_s=5.0, max_retries=0, prices={model: ModelPrice(1.0, 3.0)})
    spec = ProviderSpec(upstream.flavor, model)  # type: ignore[arg-type]
    upstream.enqueue(Reply(input_tokens=1000, output_tokens=100))
    with (
        KeyRelay(spec, ApiKey(KEYS[upstream.flavor], "K"), upstream.base_url, config, max_usd=5.0) as relay,
        worker_client(relay.access) as client,  # type: ignore[attr-defined]
    ):
        client.complete(CHAT)
    assert relay.reserved_usd == 0.0 and relay.spent_usd == pytest.approx((1000 * 1.0 + 100 * 3.0) / 1e6)
