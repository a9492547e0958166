"""LLM providers over real HTTP: the real openai / anthropic SDK clients against local scripted servers.

Every server listens on 127.0.0.1 (ephemeral port) and is stopped in teardown; no
test reaches the network. Retry delays are kept tiny with ``retry-after-ms: 1``.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("openai")
pytest.importorskip("anthropic")

from llm_servers import (
    Reply,
    ScriptedLLMServer,
    bad_request,
    model_not_found,
    rate_limited,
    server_error,
    slow,
    unauthorized,
)

from kernelopt.agents.client import LLMClient
from kernelopt.agents.factory import make_client
from kernelopt.agents.prices import DEFAULT_PRICES, ModelPrice, PriceTable
from kernelopt.agents.providers import (
    LLMCallError,
    LLMConfig,
    LLMSetupError,
    ProviderSpec,
    load_llm_config,
    parse_llm_spec,
    resolve_api_key,
)
from kernelopt.agents.providers.base import import_sdk
from kernelopt.agents.types import Message
from kernelopt.errors import KerneloptError
from kernelopt.store import Store
from kernelopt.store.llm_records import transcripts

OPENAI_KEY = "sk-test-openai-123"
ANTHROPIC_KEY = "sk-ant-test-456"
MODELS = {"openai": "gpt-4o", "anthropic": "claude-haiku-4-5"}
CHAT = [Message("system", "You are a kernel engineer."), Message("user", "Make this kernel faster.")]

StartServer = Callable[..., ScriptedLLMServer]


@pytest.fixture(autouse=True)
def api_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)


@pytest.fixture
def start_server() -> Iterator[StartServer]:
    started: list[ScriptedLLMServer] = []

    def start(flavor: str, **kwargs: float) -> ScriptedLLMServer:
        server = ScriptedLLMServer(flavor, **kwargs).start()  # type: ignore[arg-type]
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "kernelopt.db") as s:
        yield s


@pytest.fixture
def run_id(store: Store) -> int:
    return store.start_run("optimize", "01_relu", "cpu", {})


def client_for(
    server: ScriptedLLMServer,
    *,
    model: str | None = None,
    max_retries: int = 2,
    timeout_s: float = 5.0,
    **kwargs: object,
) -> LLMClient:
    """A client of the server's flavor (kind openai or anthropic) pointed at the local server."""
    spec = ProviderSpec(server.flavor, model or MODELS[server.flavor], server.base_url)  # type: ignore[arg-type]
    config_fields = {k: kwargs.pop(k) for k in ("max_concurrency", "prices") if k in kwargs}
    config = LLMConfig(timeout_s=timeout_s, max_retries=max_retries, **config_fields)  # type: ignore[arg-type]
    return make_client(spec, config=config, **kwargs)  # type: ignore[arg-type]


def sent_key(headers: dict[str, str]) -> str | None:
    """The key a request carried: Anthropic SDKs use x-api-key or a bearer token, OpenAI a bearer token."""
    if "x-api-key" in headers:
        return headers["x-api-key"]
    auth = headers.get("authorization", "")
    return auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text and text.strip() == text
    return text


both = pytest.mark.parametrize("flavor", ["openai", "anthropic"])


# -- spec and config ---------------------------------------------------------------------------


def test_parse_llm_spec_accepted_forms() -> None:
    assert parse_llm_spec("openai:gpt-4o") == ProviderSpec("openai", "gpt-4o", None)
    assert parse_llm_spec(" anthropic:claude-sonnet-4-5 ") == ProviderSpec("anthropic", "claude-sonnet-4-5", None)
    spec = parse_llm_spec("openai-compatible:qwen2.5-coder:32b@http://127.0.0.1:11434/v1/")
    assert spec == ProviderSpec("openai-compatible", "qwen2.5-coder:32b", "http://127.0.0.1:11434/v1")
    assert str(spec) == "openai-compatible:qwen2.5-coder:32b@http://127.0.0.1:11434/v1"


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("", "openai:MODEL, anthropic:MODEL or openai-compatible:MODEL@URL"),
        ("gpt-4o", "openai:MODEL, anthropic:MODEL or openai-compatible:MODEL@URL"),
        ("gemini:pro", "openai:MODEL, anthropic:MODEL or openai-compatible:MODEL@URL"),
        ("openai:", "names no model"),
        ("openai-compatible:qwen", "has no server URL"),
        ("openai-compatible:qwen@ftp://host", "is not an http(s) URL"),
        ("openai:gpt-4o@http://127.0.0.1:1/v1", "use openai-compatible:MODEL@URL"),
    ],
)
def test_parse_llm_spec_errors_are_one_line(text: str, fragment: str) -> None:
    with pytest.raises(LLMSetupError) as info:
        parse_llm_spec(text)
    assert fragment in one_line(info.value)
    assert isinstance(info.value, KerneloptError)


def test_load_llm_config(tmp_path: Path) -> None:
    path = tmp_path / "llm.toml"
    path.write_text(
        'llm = "openai-compatible:qwen"\n'
        'base_url = "http://127.0.0.1:8000/v1"\n'
        'api_key_env = "MY_LLM_KEY"\n'
        "max_concurrency = 3\n"
        "timeout_s = 42\n"
        "max_retries = 1\n"
        '[prices."qwen"]\n'
        "input_per_mtok = 0.5\n"
        "output_per_mtok = 1.5\n"
    )
    config = load_llm_config(path)
    assert config.llm == ProviderSpec("openai-compatible", "qwen", "http://127.0.0.1:8000/v1")
    assert (config.api_key_env, config.max_concurrency, config.timeout_s, config.max_retries) == ("MY_LLM_KEY", 3, 42.0, 1)
    assert config.prices == {"qwen": ModelPrice(0.5, 1.5)}
    # --llm wins over the config's llm; the config's base_url fills a missing @URL.
    other = config.spec_for("openai-compatible:other")
    assert other == ProviderSpec("openai-compatible", "other", "http://127.0.0.1:8000/v1")
    assert config.spec_for("anthropic:claude-sonnet-4-5").base_url is None
    assert config.spec_for(None) == config.llm


@pytest.mark.parametrize(
    "content, fragment",
    [
        ("llm = [", "is not valid TOML"),
        ('model = "gpt-4o"', "unknown key 'model'"),
        ('llm = "gpt-4o"', "cannot read llm in"),
        ("max_concurrency = 0", "max_concurrency must be an integer >= 1"),
        ('timeout_s = "soon"', "timeout_s must be a number"),
        ('api_key_env = "not a name"', "is not an environment variable name"),
        ('[prices."m"]\ninput_per_mtok = 1', 'prices."m" must have exactly input_per_mtok and output_per_mtok'),
        ('[prices."m"]\ninput_per_mtok = 1\noutput_per_mtok = -2', 'prices."m".output_per_mtok must be a number >= 0'),
        ("prices = 3", "prices must be a table"),
    ],
)
def test_load_llm_config_errors_are_one_line(tmp_path: Path, content: str, fragment: str) -> None:
    path = tmp_path / "llm.toml"
    path.write_text(content)
    with pytest.raises(LLMSetupError) as info:
        load_llm_config(path)
    message = one_line(info.value)
    assert fragment in message and str(path) in message


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(LLMSetupError, match="does not exist"):
        load_llm_config(tmp_path / "nope.toml")


# -- keys ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind, variable", [("anthropic", "ANTHROPIC_API_KEY"), ("openai", "OPENAI_API_KEY")])
def test_missing_key_stops_before_any_request(
    monkeypatch: pytest.MonkeyPatch, start_server: StartServer, kind: str, variable: str
) -> None:
    monkeypatch.delenv(variable)
    server = start_server(kind)
    with pytest.raises(LLMSetupError) as info:
        client_for(server)
    assert one_line(info.value) == f"{variable} is not set: export {variable}=... or use --llm openai-compatible:MODEL@URL"
    assert server.request_count == 0


def test_key_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    local = ProviderSpec("openai-compatible", "qwen", "http://127.0.0.1:1/v1")
    monkeypatch.delenv("OPENAI_API_KEY")
    key = resolve_api_key(local)
    assert (key.value, key.variable) == ("not-needed", None)
    assert "not-needed" not in repr(key)
    with pytest.raises(LLMSetupError, match=r"^MY_LLM_KEY \(api_key_env in the LLM config\) is not set"):
        resolve_api_key(local, api_key_env="MY_LLM_KEY")
    monkeypatch.setenv("MY_LLM_KEY", "secret")
    assert resolve_api_key(local, api_key_env="MY_LLM_KEY").value == "secret"
    assert resolve_api_key(ProviderSpec("anthropic", "c"), api_key_env="MY_LLM_KEY").variable == "MY_LLM_KEY"


def test_missing_sdk_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)  # makes `import openai` fail
    with pytest.raises(LLMSetupError) as info:
        import_sdk("openai")
    assert one_line(info.value) == "the openai package is not installed: pip install 'kernelopt[llm]'"
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(LLMSetupError, match=r"^the anthropic package is not installed: pip install 'kernelopt\[llm\]'$"):
        make_client("anthropic:claude-haiku-4-5")


def test_the_agents_layer_imports_without_the_sdks() -> None:
    code = (
        "import sys\n"
        "import kernelopt.agents.factory, kernelopt.agents.client, kernelopt.agents.providers\n"
        "assert not {'openai', 'anthropic'} & set(sys.modules), sorted(sys.modules)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# -- requests on the wire --------------------------------------------------------------------------


def test_openai_request_and_response(start_server: StartServer) -> None:
    server = start_server("openai")
    server.enqueue(Reply(text="use a persistent reduction", input_tokens=120, output_tokens=30))
    with client_for(server) as client:
        completion = client.complete(CHAT, role="planner", max_tokens=512, temperature=0.3)
    assert completion.text == "use a persistent reduction"
    assert (completion.provider, completion.model, completion.cached) == ("openai", "gpt-4o", False)
    assert (completion.input_tokens, completion.output_tokens) == (120, 30)
    [request] = server.requests
    assert request.path == "/v1/chat/completions"
    assert sent_key(request.headers) == OPENAI_KEY
    assert request.body["model"] == "gpt-4o"
    assert request.body["messages"] == [m.to_dict() for m in CHAT]
    assert request.body["max_completion_tokens"] == 512 and request.body["temperature"] == 0.3


def test_openai_compatible_without_key_sends_placeholder(monkeypatch: pytest.MonkeyPatch, start_server: StartServer) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    server = start_server("openai")
    with make_client(f"openai-compatible:qwen2.5-coder@{server.base_url}") as client:
        assert client.complete(CHAT).text == "ok"
    [request] = server.requests
    assert sent_key(request.headers) == "not-needed"
    assert request.body["model"] == "qwen2.5-coder"
    assert request.body["max_tokens"] == 4096 and request.body["temperature"] == 0.2


def test_openai_temperature_dropped_when_the_model_refuses_it(start_server: StartServer) -> None:
    server = start_server("openai")
    server.enqueue(bad_request("Unsupported value: 'temperature' does not support 0.2 with this model."))
    with client_for(server, model="gpt-6-luna") as client:
        assert client.complete(CHAT).text == "ok"
        client.complete([Message("user", "next")])
    first, retried, later = (r.body for r in server.requests)
    assert first["temperature"] == 0.2 and "temperature" not in retried and "temperature" not in later
    with client_for(server, model="o4-mini") as client:  # known reasoning model: never sent
        client.complete(CHAT)
    assert "temperature" not in server.requests[-1].body


def test_other_bad_requests_are_one_line(start_server: StartServer) -> None:
    server = start_server("openai")
    server.enqueue(bad_request("max_completion_tokens is too large:\n 999999 > 128000"))
    with client_for(server) as client, pytest.raises(LLMCallError) as info:
        client.complete(CHAT)
    assert one_line(info.value) == (
        f"the OpenAI API at {server.base_url} refused the request (400): "
        "max_completion_tokens is too large: 999999 > 128000"
    )
    assert server.request_count == 1


def test_anthropic_system_prompt_goes_in_system_field(start_server: StartServer) -> None:
    server = start_server("anthropic")
    server.enqueue(Reply(text="memory-bound", input_tokens=50, output_tokens=5))
    messages = [*CHAT, Message("assistant", "Which kernel?"), Message("user", "triton_red_fused_0"), Message("user", "fp32")]
    with client_for(server) as client:
        completion = client.complete(messages, role="analyst", max_tokens=256)
    assert (completion.text, completion.provider, completion.input_tokens, completion.output_tokens) == (
        "memory-bound", "anthropic", 50, 5,
    )
    [request] = server.requests
    assert request.path == "/v1/messages"
    assert sent_key(request.headers) == ANTHROPIC_KEY
    assert request.body["model"] == "claude-haiku-4-5"
    assert request.body["system"] == "You are a kernel engineer."
    assert request.body["max_tokens"] == 256
    assert request.body.get("temperature", 0.2) == 0.2  # sent only where the installed SDK still takes it
    assert request.body["messages"] == [
        {"role": "user", "content": "Make this kernel faster."},
        {"role": "assistant", "content": "Which kernel?"},
        {"role": "user", "content": "triton_red_fused_0\n\nfp32"},  # consecutive turns joined
    ]


# -- retries, timeouts and errors ---------------------------------------------------------------------


@both
@pytest.mark.parametrize("failure", [rate_limited, server_error], ids=["429", "500"])
def test_retry_then_success(start_server: StartServer, flavor: str, failure: Callable[[], Reply]) -> None:
    server = start_server(flavor)
    server.enqueue(failure(), Reply(text="second time lucky"))
    with client_for(server, max_retries=2) as client:
        assert client.complete(CHAT).text == "second time lucky"
    assert server.request_count == 2
    assert [r.headers.get("x-stainless-retry-count") for r in server.requests] == ["0", "1"]


@both
def test_timeout_then_success(start_server: StartServer, flavor: str) -> None:
    server = start_server(flavor)
    server.enqueue(slow(2.0), Reply(text="on time"))
    with client_for(server, timeout_s=0.3, max_retries=1) as client:
        assert client.complete(CHAT).text == "on time"
    assert server.request_count == 2


@both
def test_timeouts_exhaust_retries(start_server: StartServer, flavor: str) -> None:
    server = start_server(flavor)
    server.enqueue(slow(2.0), slow(2.0))
    with client_for(server, timeout_s=0.3, max_retries=1) as client, pytest.raises(LLMCallError) as info:
        client.complete(CHAT)
    label = "OpenAI" if flavor == "openai" else "Anthropic"
    assert one_line(info.value) == (
        f"the {label} API at {server.base_url} did not answer within 0.3 s after 1 retries: "
        "raise timeout_s in the LLM config or check the server"
    )
    assert server.request_count == 2


@both
def test_rate_limits_exhaust_retries(start_server: StartServer, flavor: str) -> None:
    server = start_server(flavor)
    server.enqueue(rate_limited(), rate_limited(), rate_limited())
    with client_for(server, max_retries=2) as client, pytest.raises(LLMCallError) as info:
        client.complete(CHAT)
    assert "still answered 429 (rate limit) after 2 retries" in one_line(info.value)
    assert info.value.status == 429 and not info.value.fatal
    assert server.request_count == 3


@both
def test_server_errors_exhaust_retries(start_server: StartServer, flavor: str) -> None:
    server = start_server(flavor)
    server.enqueue(server_error(), server_error())
    with client_for(server, max_retries=1) as client, pytest.raises(LLMCallError) as info:
        client.complete(CHAT)
    assert "still answered 500 (server error) after 1 retries" in one_line(info.value)


@both
def test_rejected_key(start_server: StartServer, flavor: str) -> None:
    server = start_server(flavor)
    server.enqueue(unauthorized())
    with client_for(server) as client, pytest.raises(LLMSetupError) as info:
        client.complete(CHAT)
    label, variable = ("OpenAI", "OPENAI_API_KEY") if flavor == "openai" else ("Anthropic", "ANTHROPIC_API_KEY")
    assert one_line(info.value) == f"the {label} API rejected the key in {variable} (401): check the key"
    assert info.value.fatal
    assert server.request_count == 1  # a 401 is not retried


@both
def test_unknown_model(start_server: StartServer, flavor: str) -> None:
    server = start_server(flavor)
    server.enqueue(model_not_found("no-such-model"))
    with client_for(server, model="no-such-model") as client, pytest.raises(LLMSetupError) as info:
        client.complete(CHAT)
    label = "OpenAI" if flavor == "openai" else "Anthropic"
    assert one_line(info.value) == f"model no-such-model is not known to {label} at {server.base_url}: check --llm"


@both
def test_malformed_json_body(start_server: StartServer, flavor: str) -> None:
    server = start_server(flavor)
    server.enqueue(Reply(body="{this is not json"))
    with client_for(server) as client, pytest.raises(LLMCallError) as info:
        client.complete(CHAT)
    assert "sent an answer kernelopt cannot read" in one_line(info.value)


def test_connection_refused(start_server: StartServer) -> None:
    server = start_server("openai")
    url = server.base_url
    server.stop()  # nothing listens on that port any more
    spec = ProviderSpec("openai-compatible", "qwen", url)
    with make_client(spec, config=LLMConfig(max_retries=0, timeout_s=2)) as client, pytest.raises(LLMCallError) as info:
        client.complete(CHAT)
    assert one_line(info.value).startswith(f"cannot reach the openai-compatible API at {url}")


# -- cost, cache, transcripts, concurrency ------------------------------------------------------------


@both
def test_cost_accounting(start_server: StartServer, flavor: str) -> None:
    server = start_server(flavor)
    server.enqueue(
        Reply(input_tokens=1000, output_tokens=200),
        Reply(input_tokens=3000, output_tokens=0),
    )
    prices = {"house-model": {"input_per_mtok": 3.0, "output_per_mtok": 15.0}}
    with client_for(server, model="house-model", prices=prices) as client:
        first = client.complete(CHAT)
        second = client.complete([Message("user", "again")])
        usage = client.usage()
    # 1000 * $3/M + 200 * $15/M = $0.003 + $0.003; then 3000 * $3/M = $0.009.
    assert first.cost_usd == pytest.approx(0.006)
    assert second.cost_usd == pytest.approx(0.009)
    assert (usage.calls, usage.input_tokens, usage.output_tokens, usage.errors) == (2, 4000, 200, 0)
    assert usage.cost_usd == pytest.approx(0.015)
    assert usage.unpriced_models == ()


def test_unknown_price_costs_zero_and_is_flagged(start_server: StartServer) -> None:
    server = start_server("openai")
    with client_for(server, model="mystery-model") as client:
        assert client.complete(CHAT).cost_usd == 0.0
        assert client.usage().unpriced_models == ("mystery-model",)


def test_price_table_lookup() -> None:
    table = PriceTable({"gpt-4o": ModelPrice(1.0, 2.0)})
    assert table.lookup("gpt-4o") == ModelPrice(1.0, 2.0)  # the override wins
    assert table.lookup("gpt-4o-2024-08-06") == ModelPrice(1.0, 2.0)  # snapshot suffix
    assert table.lookup("gpt-4o-mini") == DEFAULT_PRICES["gpt-4o-mini"]  # never the shorter prefix's price
    assert table.lookup("claude-sonnet-4-20250514") == DEFAULT_PRICES["claude-sonnet-4"]
    assert table.lookup("claude-opus-4-1-20250805") == DEFAULT_PRICES["claude-opus-4-1"]
    assert table.lookup("gpt-4o-audio-preview") is None
    assert table.cost("unknown", 10, 10) is None


@both
def test_cache_replays_without_http(start_server: StartServer, store: Store, run_id: int, flavor: str) -> None:
    server = start_server(flavor)
    server.enqueue(Reply(text="cached answer", input_tokens=1000, output_tokens=100))
    with client_for(server, store=store, run_id=run_id) as client:
        first = client.complete(CHAT, role="coder")
        assert server.request_count == 1
        again = client.complete(CHAT, role="coder")
        assert server.request_count == 1  # no HTTP request
        assert (again.text, again.cached, again.cost_usd, again.input_tokens) == ("cached answer", True, 0.0, 0)
        assert not first.cached and first.cost_usd > 0
        client.complete(CHAT, role="coder", temperature=0.9)  # another setting, another key
        assert server.request_count == 2
        usage = client.usage()
        assert (usage.calls, usage.cache_hits, usage.input_tokens) == (2, 1, 1011)
    # A later run replays from the same store.
    later_run = store.start_run("optimize", "01_relu", "cpu", {})
    with client_for(server, store=store, run_id=later_run) as replay:
        assert replay.complete(CHAT, role="coder").cached
    assert server.request_count == 2
    # cache=False always asks.
    with client_for(server, store=store, run_id=later_run, cache=False) as fresh:
        assert not fresh.complete(CHAT).cached
    assert server.request_count == 3


def test_transcripts_are_written(start_server: StartServer, store: Store, run_id: int) -> None:
    server = start_server("anthropic")
    server.enqueue(Reply(text="plan: vectorize loads", input_tokens=2000, output_tokens=100), unauthorized())
    with client_for(server, store=store, run_id=run_id) as client:
        client.complete(CHAT, role="planner")
        client.complete(CHAT, role="planner")  # replayed from the cache
        with pytest.raises(LLMSetupError):
            client.complete([Message("user", "judge this")], role="judge")
    rows = transcripts(store.connection, run_id)
    assert [(r.role, r.provider, r.model, r.run_id) for r in rows] == [
        ("planner", "anthropic", "claude-haiku-4-5", run_id),
        ("planner", "anthropic", "claude-haiku-4-5", run_id),
        ("judge", "anthropic", "claude-haiku-4-5", run_id),
    ]
    sent, replayed, failed = rows
    assert sent.messages == [m.to_dict() for m in CHAT]
    assert (sent.response, sent.input_tokens, sent.output_tokens, sent.error) == ("plan: vectorize loads", 2000, 100, None)
    assert sent.cost_usd == pytest.approx(2000 * 1.0 / 1e6 + 100 * 5.0 / 1e6)  # built-in claude-haiku-4-5 price
    assert (replayed.response, replayed.cost_usd, replayed.input_tokens) == ("plan: vectorize loads", 0.0, 0)
    assert failed.response is None and "rejected the key in ANTHROPIC_API_KEY (401)" in (failed.error or "")


@both
def test_concurrency_limit(start_server: StartServer, store: Store, run_id: int, flavor: str) -> None:
    server = start_server(flavor, default_delay_s=0.15)
    with client_for(server, store=store, run_id=run_id, max_concurrency=2) as client:
        with ThreadPoolExecutor(max_workers=8) as pool:
            futures = [
                pool.submit(client.complete, [Message("user", f"kernel {i}")], role="coder") for i in range(8)
            ]
            completions = [f.result() for f in futures]
        usage = client.usage()
    assert server.max_in_flight == 2
    assert server.request_count == 8 and all(c.text == "ok" for c in completions)
    assert usage.calls == 8
    # Written from the pool's threads through the client's second connection.
    assert len(transcripts(store.connection, run_id)) == 8


def test_server_stops_promptly_with_a_sleeping_handler(start_server: StartServer) -> None:
    server = start_server("openai", default_delay_s=30.0)
    with client_for(server, timeout_s=0.2, max_retries=0) as client, pytest.raises(LLMCallError):
        client.complete(CHAT)
    started = time.monotonic()
    server.stop()  # wakes the handler still sleeping through its 30 s
    assert time.monotonic() - started < 5
