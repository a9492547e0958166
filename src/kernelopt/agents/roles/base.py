"""What every role shares: prompt files, the JSON reply contract, bounded repair.

A role renders its prompt (a jinja2 template shipped as
``kernelopt/agents/prompts/<role>.md``) with plain data, shows the JSON schema of
its pydantic output model, and asks the chat client once. The reply must hold
one JSON object; prose around it and Markdown fences are tolerated. A reply that
does not parse or does not validate is sent back with the error, at most
``max_repairs`` times, then the role gives up with a one-line
:class:`RoleOutputError`.

Every prompt file starts with a front-matter header carrying a ``version:``
line. The version and a digest of the template text go into the first line of
the system message, so every transcript and cache entry says which prompt
produced it, and into each :class:`RoleCall` the role returns.

Only source code, shapes, dtypes and measurements may reach a prompt: a tensor
(or numpy array) anywhere in a role's context raises
:class:`TensorInPromptError` before anything is sent.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any, ClassVar, Generic, TypeVar

import jinja2
from pydantic import BaseModel, ValidationError

from kernelopt.agents.types import ChatClient, Completion, Message
from kernelopt.errors import KerneloptError

T = TypeVar("T", bound=BaseModel)

_FRONT_MATTER_RE = re.compile(r"\A---\n(.*?)\n---\n", re.S)
_FENCE_RE = re.compile(r"```[ \t]*([A-Za-z]*)[ \t]*\n(.*?)```", re.S)
MAX_ERROR_CHARS = 600


class RoleOutputError(KerneloptError):
    """A role's model kept replying with output that does not parse or validate."""


class TensorInPromptError(TypeError):
    """A tensor or array reached a prompt context: prompts never carry weights or input data."""


class PromptError(KerneloptError):
    """A prompt file that is missing or malformed (a packaging bug)."""


# -- prompt files -------------------------------------------------------------------------


def _prompt_file_text(filename: str) -> str:
    path = resources.files("kernelopt.agents").joinpath("prompts").joinpath(filename)
    if not path.is_file():
        raise PromptError(f"prompt file kernelopt/agents/prompts/{filename} is missing; reinstall kernelopt")
    return path.read_text(encoding="utf-8")


def _split_front_matter(text: str, filename: str) -> tuple[dict[str, str], str]:
    m = _FRONT_MATTER_RE.match(text.replace("\r\n", "\n"))
    if not m:
        raise PromptError(f"prompts/{filename} must start with a '---' header holding a 'version:' line")
    header = {}
    for line in m.group(1).splitlines():
        key, sep, value = line.partition(":")
        if sep:
            header[key.strip()] = value.strip()
    return header, text.replace("\r\n", "\n")[m.end() :]


def _load_template_source(filename: str) -> str:
    return _split_front_matter(_prompt_file_text(filename), filename)[1]


_ENV = jinja2.Environment(
    loader=jinja2.FunctionLoader(_load_template_source),
    undefined=jinja2.StrictUndefined,
    autoescape=False,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=False,
)


@dataclass(frozen=True)
class Prompt:
    """One role's prompt file: its version, a digest of its text and the compiled template."""

    name: str
    version: str
    digest: str  # sha256 of the file and the files it includes, first 12 hex digits
    template: jinja2.Template = dataclasses.field(repr=False, compare=False)

    @property
    def tag(self) -> str:
        return f"{self.name} v{self.version} ({self.digest})"

    def render(self, context: Mapping[str, Any]) -> list[Message]:
        """The system and user messages (the template's ``system`` and ``user`` blocks)."""
        ctx = self.template.new_context(dict(context))
        system = "".join(self.template.blocks["system"](ctx)).strip()
        user = "".join(self.template.blocks["user"](ctx)).strip()
        header = f"<!-- kernelopt prompt: {self.name} version: {self.version} digest: {self.digest} -->"
        return [Message("system", f"{header}\n{system}"), Message("user", user)]


@functools.cache
def load_prompt(name: str) -> Prompt:
    """The prompt ``prompts/<name>.md``; its header must carry ``version:``."""
    filename = f"{name}.md"
    text = _prompt_file_text(filename)
    header, body = _split_front_matter(text, filename)
    version = header.get("version")
    if not version:
        raise PromptError(f"prompts/{filename} has no 'version:' line in its header")
    template = _ENV.get_template(filename)
    for block in ("system", "user"):
        if block not in template.blocks:
            raise PromptError(f"prompts/{filename} must define a {{% block {block} %}}")
    digest = hashlib.sha256(text.encode())
    for included in _includes(body):
        digest.update(_prompt_file_text(included).encode())
    return Prompt(name, version, digest.hexdigest()[:12], template)


def _includes(body: str) -> list[str]:
    """Every file ``body`` includes, directly or through an included file (the digest covers them all)."""
    found: list[str] = []
    pending = re.findall(r"""{%-?\s*include\s+["']([^"']+)["']""", body)
    while pending:
        name = pending.pop()
        if name not in found:
            found.append(name)
            pending += re.findall(r"""{%-?\s*include\s+["']([^"']+)["']""", _prompt_file_text(name))
    return sorted(found)


def schema_text(model: type[BaseModel]) -> str:
    """The model's JSON schema as shown to the LLM."""
    return json.dumps(model.model_json_schema(), indent=2)


# -- what may enter a prompt -------------------------------------------------------------------


def _data_types() -> tuple[type, ...]:
    # Only modules already imported can have produced such objects; never import them here.
    found = []
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(getattr(torch, "Tensor", None), type):
        found.append(torch.Tensor)
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(getattr(numpy, "ndarray", None), type):
        found.append(numpy.ndarray)
    return tuple(found)


def assert_no_tensors(value: Any, path: str = "context") -> None:
    """Raise :class:`TensorInPromptError` if a tensor or array hides anywhere in ``value``.

    Walks mappings, sequences, sets, dataclasses and pydantic models.
    """
    banned = _data_types()
    if not banned:
        return
    seen: set[int] = set()

    def walk(item: Any, where: str, depth: int) -> None:
        if isinstance(item, banned):
            shape = tuple(getattr(item, "shape", ()))
            raise TensorInPromptError(
                f"{where} is a {type(item).__module__}.{type(item).__name__} of shape {shape}; prompts take only "
                "source code, shapes, dtypes and measurements, never tensor data"
            )
        if isinstance(item, (str, bytes, int, float, bool, type(None))) or depth > 32 or id(item) in seen:
            return
        seen.add(id(item))
        if isinstance(item, Mapping):
            for key, sub in item.items():
                walk(key, f"{where} key {key!r}", depth + 1)
                walk(sub, f"{where}[{key!r}]", depth + 1)
        elif isinstance(item, (list, tuple, set, frozenset)):
            for i, sub in enumerate(item):
                walk(sub, f"{where}[{i}]", depth + 1)
        elif isinstance(item, BaseModel):
            for name, sub in item:
                walk(sub, f"{where}.{name}", depth + 1)
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            for f in dataclasses.fields(item):
                walk(getattr(item, f.name), f"{where}.{f.name}", depth + 1)

    walk(value, path, 0)


# -- replies ---------------------------------------------------------------------------------------


def json_objects(text: str, limit: int = 20) -> Iterator[dict[str, Any]]:
    """The JSON objects in a reply, most likely first: ```json fences, other fences, then bare text.

    Decoding is lenient about raw newlines inside strings (``strict=False``), a
    common slip when a model puts source code in a JSON string.
    """
    decoder = json.JSONDecoder(strict=False)
    fences = [(lang.lower(), body) for lang, body in _FENCE_RE.findall(text)]
    chunks = [b for lang, b in fences if lang == "json"] + [b for lang, b in fences if lang == ""] + [text]
    found = 0
    for chunk in chunks:
        pos = chunk.find("{")
        while pos != -1:
            try:
                obj, end = decoder.raw_decode(chunk, pos)
            except json.JSONDecodeError:
                pos = chunk.find("{", pos + 1)
                continue
            if isinstance(obj, dict):
                yield obj
                found += 1
                if found >= limit:
                    return
            pos = chunk.find("{", end)


def describe_validation_error(exc: ValidationError) -> str:
    """A pydantic error as one line: ``field: message; field: message``."""
    parts = []
    for err in exc.errors()[:6]:
        loc = ".".join(str(p) for p in err.get("loc", ())) or "(object)"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    more = len(exc.errors()) - 6
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def _one_line(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def parse_reply(text: str, model: type[T], check: Callable[[T], str | None] | None = None) -> T:
    """The first JSON object in ``text`` that validates as ``model`` and passes ``check``.

    Raises ``ValueError`` with a one-line reason (for the first candidate object)
    when none does.
    """
    first_error: str | None = None
    for obj in json_objects(text):
        try:
            value = model.model_validate(obj)
        except ValidationError as exc:
            first_error = first_error or describe_validation_error(exc)
            continue
        problem = check(value) if check is not None else None
        if problem:
            first_error = first_error or problem
            continue
        return value
    raise ValueError(_one_line(first_error or "the reply holds no JSON object"))


# -- running a role ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RoleCall:
    """One request to the model and what became of its reply."""

    role: str
    prompt_version: str
    prompt_digest: str
    attempt: int  # 0 for the first request, then one per repair round
    messages: tuple[Message, ...]
    completion: Completion
    error: str | None  # why the reply was rejected; None when it was accepted


@dataclass(frozen=True)
class RoleResult(Generic[T]):
    output: T
    role: str
    prompt_version: str
    calls: tuple[RoleCall, ...]

    @property
    def repairs(self) -> int:
        return len(self.calls) - 1

    @property
    def cost_usd(self) -> float:
        return sum(c.completion.cost_usd for c in self.calls)


def repair_message(error: str) -> str:
    return f"Your last reply was not valid: {error}. Reply with only the JSON object."


class Role(Generic[T]):
    """A role: one prompt file, one pydantic output model, bounded repair of bad replies."""

    name: ClassVar[str]
    output_model: ClassVar[type[BaseModel]]

    def __init__(
        self, client: ChatClient, *, max_repairs: int = 2, temperature: float = 0.2, max_tokens: int = 4096
    ) -> None:
        if max_repairs < 0:
            raise ValueError(f"max_repairs must be >= 0, got {max_repairs}")
        self.client = client
        self.max_repairs = max_repairs
        self.temperature = temperature
        self.max_tokens = max_tokens

    @property
    def prompt(self) -> Prompt:
        return load_prompt(self.name)

    def messages(self, context: Mapping[str, Any]) -> list[Message]:
        """The messages the role would send for ``context`` (tensors refused)."""
        assert_no_tensors(context)
        return self.prompt.render({**context, "schema": schema_text(self.output_model)})

    def ask(self, context: Mapping[str, Any], check: Callable[[Any], str | None] | None = None) -> RoleResult[T]:
        """Render, send, parse and validate; repair up to ``max_repairs`` times."""
        prompt = self.prompt
        messages = self.messages(context)
        calls: list[RoleCall] = []
        error = ""
        for attempt in range(self.max_repairs + 1):
            completion = self.client.complete(
                list(messages), role=self.name, max_tokens=self.max_tokens, temperature=self.temperature
            )
            try:
                output = parse_reply(completion.text, self.output_model, check)
            except ValueError as exc:
                error = str(exc)
                calls.append(
                    RoleCall(self.name, prompt.version, prompt.digest, attempt, tuple(messages), completion, error)
                )
                messages = [*messages, Message("assistant", completion.text), Message("user", repair_message(error))]
                continue
            calls.append(RoleCall(self.name, prompt.version, prompt.digest, attempt, tuple(messages), completion, None))
            return RoleResult(output, self.name, prompt.version, tuple(calls))  # type: ignore[arg-type]
        raise RoleOutputError(
            f"the {self.name} gave no valid reply in {self.max_repairs + 1} attempts "
            f"(prompt {prompt.tag}); last problem: {_one_line(error, 300)}"
        )


# -- plain data the templates show -------------------------------------------------------------------

_KIND_ALIASES = {"cooperative_reduction": "reduction", "split_scan": "scan"}


def kernel_kind(heuristic: str | None) -> str:
    """The knowledge layer's kernel kind for an Inductor decorator name."""
    if not heuristic:
        return "any"
    return _KIND_ALIASES.get(heuristic, heuristic)


def trim(value: Any, max_items: int = 12, max_chars: int = 600) -> Any:
    """A JSON-friendly copy with long strings and lists cut (head and tail kept)."""
    if isinstance(value, str):
        if len(value) <= max_chars:
            return value
        head = max_chars // 4
        return f"{value[:head]} ...[{len(value) - max_chars} chars cut]... {value[-(max_chars - head) :]}"
    if isinstance(value, Mapping):
        items = list(value.items())
        out = {str(k): trim(v, max_items, max_chars) for k, v in items[: max_items * 2]}
        if len(items) > max_items * 2:
            out["..."] = f"{len(items) - max_items * 2} more keys"
        return out
    if isinstance(value, (list, tuple)):
        out_list = [trim(v, max_items, max_chars) for v in value[:max_items]]
        if len(value) > max_items:
            out_list.append(f"... {len(value) - max_items} more")
        return out_list
    if isinstance(value, (int, float, bool)) or value is None:
        return value
    return trim(str(value), max_items, max_chars)


def format_number(value: Any) -> str:
    """Numbers as people read them: 3 significant digits for small floats, separators for large."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if value != value or value in (float("inf"), float("-inf")):
        return str(value)
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}"
