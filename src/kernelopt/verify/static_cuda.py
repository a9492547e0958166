"""Gate 1 for a CUDA C++ candidate: what a kernel written in C++ may contain, and the slot it must fill.

A CUDA C++ candidate stands in for one Triton kernel of the captured graph: it is built with
``torch.utils.cpp_extension.load_inline`` and called from the wrapper in the Triton kernel's place,
with the same arguments. Its source is untrusted text, so before anything compiles it this gate
reads it, after blanking comments and string literals (so neither can hide a construct or fake
one), and refuses every construct a kernel has no business containing:

* work off the current stream: streams, events, graphs, device-wide synchronisation, a launch
  whose fourth ``<<< >>>`` argument is not the current stream, the launch APIs that bypass
  ``<<< >>>``;
* clocks and timers: ``clock64``, ``%globaltimer``, ``std::chrono`` and the like;
* host allocation and copies: ``cudaMalloc``, ``malloc``, ``new``, ``torch::empty``, ``cudaMemcpy``;
* files, processes, the network and the environment;
* state kept across calls (the way to hand back a cached result): ``static``, ``__device__`` and
  ``__managed__`` variables, ``thread_local``, ``extern`` (but ``extern __shared__``);
* PyTorch compute: any ``torch::`` or ``at::`` name outside a short allow-list, and any method
  of a tensor argument but the few that read its layout (``data_ptr``, ``size``, ``stride``...);
* preprocessor tricks: includes outside an allow-list, token pasting and stringising, other
  directives than ``include``, ``define``, ``pragma unroll`` and ``pragma once``;
* inline PTX beyond a small allow-list of instructions, and every special register that reads a
  clock or where a thread runs.

The slot contract: at least one ``__global__`` kernel and exactly one host function
``void launch(...)`` whose parameters are the Triton kernel's runtime parameters in order: a
``torch::Tensor`` for each pointer, an integer (or floating) scalar for each other one.

What text cannot show (partial writes, wrong values, shape shortcuts) is left to gates 2-4,
as for Triton candidates; the verdict has the same shape as :func:`kernelopt.verify.static.check_static`'s.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass
from functools import lru_cache

from kernelopt.verify.static_findings import Finding, findings_verdict
from kernelopt.verify.static_rules import MAX_SOURCE_CHARS
from kernelopt.verify.static_signature import kernel_signature
from kernelopt.verify.verdict import Verdict

CUDA_RULES: dict[str, str] = {
    "size": "the source is too large to check",
    "preprocessor": "only #include of the allowed headers, #define without # or ##, #pragma unroll and #pragma once",
    "stream": "a kernel runs on the current stream only: no streams, events, graphs or synchronisation",
    "launch": "every <<< >>> launch names four arguments, the last the current stream",
    "timer": "no clocks or timers: the judge times the kernel",
    "allocation": "no host-side allocation or copies: the kernel writes into the buffers it is given",
    "io": "no files, printing, processes, network or environment",
    "state": "no state kept across calls (static, __device__ or __managed__ variables, thread_local, extern)",
    "torch_op": "no PyTorch compute: only the layout of the tensor arguments may be read",
    "inline_asm": "inline PTX only from the allowed instructions, and no special registers",
    "entry": "exactly one host function `void launch(...)` and at least one __global__ kernel",
    "signature": "launch(...) takes the Triton kernel's runtime parameters, in order",
}
PRIORITY = {rule: i for i, rule in enumerate(CUDA_RULES)}

ALLOWED_INCLUDES = frozenset(
    {
        "torch/extension.h",
        "ATen/cuda/CUDAContext.h",
        "c10/cuda/CUDAStream.h",
        "c10/cuda/CUDAException.h",
        "cuda.h",
        "cuda_runtime.h",
        "cuda_fp16.h",
        "cuda_bf16.h",
        "cstdint",
        "stdint.h",
        "cmath",
        "math.h",
        "climits",
        "cfloat",
        "type_traits",
    }
)
_DENIED: dict[str, tuple[str, ...]] = {
    "stream": (
        r"cudaStream\w*",
        r"cuStream\w*",
        r"cudaEvent\w*",
        r"cuEvent\w*",
        r"cudaGraph\w*",
        r"\w*CaptureStatus\w*",  # at::cuda::currentStreamCaptureStatus: other work recorded than run
        r"\w*[Ii]sCapturing\w*",
        r"cudaDeviceSynchronize",
        r"cudaThreadSynchronize",
        r"cudaDeviceReset",
        r"cudaSetDevice",
        r"getStreamFromPool",
        r"getStreamFromExternal",
        r"setCurrentCUDAStream",
        r"CUDAStreamGuard",
        r"OptionalCUDAStreamGuard",
        r"CUDAMultiStreamGuard",
        r"__syncgrid",
        r"grid_group",
        r"this_grid",
    ),
    "launch": (r"cudaLaunch\w*", r"cuLaunch\w*", r"cudaConfigureCall"),
    "timer": (
        r"clock",
        r"clock64",
        r"__globaltimer",
        r"globaltimer\w*",
        r"chrono",
        r"gettimeofday",
        r"clock_gettime",
        r"time",
        r"__nanosleep",
        r"rdtsc\w*",
    ),
    "allocation": (
        r"cudaMalloc\w*",
        r"cudaFree\w*",
        r"cudaHostAlloc",
        r"cudaMemcpy\w*",
        r"cudaMemset\w*",
        r"cudaMemPool\w*",
        r"cuMem\w*",
        r"malloc",
        r"calloc",
        r"realloc",
        r"free",
        r"new",
        r"delete",
        r"alloca",
    ),
    "io": (
        r"f?open\w*",
        r"fread",
        r"fwrite",
        r"f?printf",
        r"sprintf",
        r"snprintf",
        r"puts",
        r"cout",
        r"cerr",
        r"clog",
        r"\w*fstream",
        r"FILE",
        r"socket",
        r"connect",
        r"system",
        r"popen",
        r"getenv",
        r"setenv",
        r"putenv",
        r"dlopen",
        r"dlsym",
        r"fork",
        r"exec\w*",
        r"thread",
        r"pthread\w*",
        r"async",
        r"syscall",
    ),
    "state": (r"static", r"thread_local", r"__managed__", r"mutable"),
}
_DENIED_PATTERNS = {rule: re.compile(r"\b(?:" + "|".join(words) + r")\b") for rule, words in _DENIED.items()}

# Qualified torch / ATen / c10 names a launcher may use: types, dtype tags, the current stream, checks.
ALLOWED_QUALIFIED = frozenset(
    {
        "torch::Tensor",
        "at::Tensor",
        "torch::ScalarType",
        "at::ScalarType",
        "torch::kFloat",
        "torch::kFloat32",
        "torch::kHalf",
        "torch::kFloat16",
        "torch::kBFloat16",
        "torch::kFloat64",
        "torch::kDouble",
        "torch::kInt",
        "torch::kInt32",
        "torch::kInt64",
        "torch::kLong",
        "torch::kBool",
        "at::kFloat",
        "at::kHalf",
        "at::kBFloat16",
        "at::kDouble",
        "at::kInt",
        "at::kLong",
        "at::kBool",
        "at::Half",
        "at::BFloat16",
        "c10::Half",
        "c10::BFloat16",
        "at::cuda::getCurrentCUDAStream",
        "c10::cuda::getCurrentCUDAStream",
        "at::cuda::CUDAStream",
        "c10::cuda::CUDAStream",
    }
)
ALLOWED_TENSOR_METHODS = frozenset(
    {
        "data_ptr",
        "const_data_ptr",
        "mutable_data_ptr",
        "numel",
        "size",
        "sizes",
        "stride",
        "strides",
        "dim",
        "scalar_type",
        "dtype",
        "is_contiguous",
        "is_cuda",
        "device",
        "get_device",
        "element_size",
        "storage_offset",
    }
)
# PTX a kernel may write by hand: loads and stores with cache hints, async copies, warp
# shuffles and matrix instructions, conversions, arithmetic. Nothing that reads a clock,
# where a thread runs, or talks to the host.
ALLOWED_PTX = frozenset(
    {
        "ld",
        "st",
        "ldu",
        "prefetch",
        "cp",
        "ldmatrix",
        "stmatrix",
        "mma",
        "wgmma",
        "shfl",
        "cvt",
        "mov",
        "add",
        "sub",
        "mul",
        "mad",
        "fma",
        "max",
        "min",
        "ex2",
        "lg2",
        "rcp",
        "rsqrt",
        "sqrt",
        "tanh",
        "and",
        "or",
        "xor",
        "not",
        "shl",
        "shr",
        "selp",
        "setp",
        "bar",
        "barrier",
        "fence",
        "red",
        "atom",
        "prmt",
        "lop3",
    }
)
SPECIAL_REGISTERS = re.compile(r"%(?:globaltimer\w*|clock\w*|smid|nsmid|warpid|nwarpid|gridid|pm\d+|envreg\d+)")
SCALAR_TYPES = re.compile(
    r"^(?:const\s+)?(?:int64_t|int32_t|int|long|long long|unsigned|uint32_t|uint64_t|size_t|double|float|bool)$"
)
TENSOR_TYPE = re.compile(r"^(?:const\s+)?(?:torch|at)::Tensor\s*&?$")


def _found(rule: str, line: int, construct: str) -> Finding:
    """A :class:`Finding` of one of :data:`CUDA_RULES`."""
    return Finding(rule, line, construct, CUDA_RULES[rule])


@dataclass(frozen=True)
class _Scrubbed:
    code: str  # comments and literals blanked, newlines kept: line numbers hold
    strings: list[tuple[int, str]]  # (offset, contents) of every string literal


_SPECIAL = re.compile(r"[/\"'R]")


def _scrub(source: str) -> _Scrubbed:
    """Comments blanked and string and character literals emptied, in one left-to-right scan (no
    regex backtracking, so a megabyte of unterminated literals costs a linear pass). Every blank
    keeps its newlines: offsets and line numbers of the code are the source's."""
    out = list(source)
    strings: list[tuple[int, str]] = []
    n = len(source)

    def blank(start: int, stop: int) -> None:
        for k in range(start, stop):
            if out[k] != "\n":
                out[k] = " "

    def quoted(start: int, quote: str) -> int:
        """The end of a literal opened at ``start`` (escapes skipped; a newline ends it too)."""
        k = start + 1
        while k < n and source[k] != quote and source[k] != "\n":
            k += 2 if source[k] == "\\" else 1
        return min(k, n)

    found = _SPECIAL.search(source)
    while found is not None:
        i, ch = found.start(), found.group(0)
        nxt = i + 1
        if ch == "/" and source.startswith("//", i):
            end = source.find("\n", i)
            nxt = n if end < 0 else end
            blank(i, nxt)
        elif ch == "/" and source.startswith("/*", i):
            end = source.find("*/", i + 2)
            nxt = n if end < 0 else end + 2
            blank(i, nxt)
        elif ch == "R" and source.startswith('R"', i) and not (i and (source[i - 1].isalnum() or source[i - 1] == "_")):
            paren = source.find("(", i + 2, i + 19)
            delimiter = source[i + 2 : paren] if paren >= 0 else None
            if delimiter is not None and not any(c in delimiter for c in ' \t\n\\)"'):
                close = source.find(")" + delimiter + '"', paren + 1)
                stop = n if close < 0 else close
                strings.append((i, source[paren + 1 : stop]))
                nxt = n if close < 0 else close + len(delimiter) + 2
                blank(i + 2, max(i + 2, nxt - 1))
        elif ch in "\"'":
            end = quoted(i, ch)
            if ch == '"':
                strings.append((i, source[i + 1 : end]))
            blank(i + 1, end)
            nxt = end + 1
        found = _SPECIAL.search(source, nxt) if nxt < n else None
    return _Scrubbed("".join(out), strings)


@lru_cache(maxsize=4)
def _newlines(code: str) -> list[int]:
    return [i for i, ch in enumerate(code) if ch == "\n"]


def _line(code: str, index: int) -> int:
    """The 1-based line of ``index`` (a bisection: a megabyte of findings stays linear)."""
    return bisect_left(_newlines(code), index) + 1


def _preprocessor(code: str, source: str) -> list[Finding]:
    found = []
    raw_lines = source.splitlines()
    for number, text in enumerate(code.splitlines(), start=1):
        stripped = text.strip()
        if not stripped.startswith("#"):
            continue
        directive = stripped[1:].strip()
        word = directive.split(maxsplit=1)[0] if directive else ""
        original = raw_lines[number - 1].strip() if number <= len(raw_lines) else stripped
        if word == "include":
            header = re.match(r'#\s*include\s*[<"]([^>"]+)[>"]', original)
            if header is None or header.group(1).strip() not in ALLOWED_INCLUDES:
                found.append(_found("preprocessor", number, original))
        elif word == "define":
            if "#" in directive[len("define") :]:
                found.append(_found("preprocessor", number, f"{original} (token pasting or stringising)"))
        elif word == "pragma":
            if directive.split()[1:2] not in (["unroll"], ["once"]):
                found.append(_found("preprocessor", number, original))
        else:
            found.append(_found("preprocessor", number, original))
    return found


def _denied_words(code: str) -> list[Finding]:
    found = []
    for rule, pattern in _DENIED_PATTERNS.items():
        for match in pattern.finditer(code):
            found.append(_found(rule, _line(code, match.start()), match.group(0)))
    for match in re.finditer(r"\bextern\b(?!\s+__shared__)", code):
        found.append(_found("state", _line(code, match.start()), "extern"))
    # __device__ / __constant__ variables at file scope: a qualifier followed by a declarator, not a function
    # greedy over a class that excludes its own terminators: one pass, whatever the text
    for match in re.finditer(r"\b(__device__|__constant__)\b[^;{(=\[]*(?P<end>[;=\[]?)", code):
        if match.group("end"):
            found.append(_found("state", _line(code, match.start()), f"{match.group(1)} variable"))
    return found


def _qualified(code: str) -> list[Finding]:
    found = []
    for match in re.finditer(r"\busing\s+namespace\b[^;]*|\bnamespace\s+\w+\s*=[^;]*", code):
        found.append(_found("torch_op", _line(code, match.start()), match.group(0).strip()))
    for match in re.finditer(r"\b(?:torch|at|c10)(?:::\w+)+", code):
        if match.group(0) not in ALLOWED_QUALIFIED:
            found.append(_found("torch_op", _line(code, match.start()), match.group(0)))
    return found


def _inline_asm(code: str, source: str, strings: list[tuple[int, str]]) -> list[Finding]:
    found = []
    offsets = [offset for offset, _ in strings]  # in source order: found by one left-to-right pass
    marks = {ch: [i for i, c in enumerate(code) if c == ch] for ch in "():;"}

    def next_mark(ch: str, after: int) -> int:
        at = bisect_left(marks[ch], after)
        return marks[ch][at] if at < len(marks[ch]) else len(code)

    keywords = list(re.finditer(r"\b(?:asm|__asm__|__asm)\b", code))
    for index, match in enumerate(keywords):
        line = _line(code, match.start())
        following = keywords[index + 1].start() if index + 1 < len(keywords) else len(code)
        # the template: the string literals between the asm's "(" and its first ":" (operands follow),
        # or its ")" (literals are blanked, so the first ")" closes a template without operands)
        opened = next_mark("(", match.end())
        stop = min(next_mark(":", opened), next_mark(";", opened), next_mark(")", opened), following)
        first, last = bisect_left(offsets, opened), bisect_left(offsets, stop)
        template = " ".join(text for _, text in strings[first:last])
        for register in SPECIAL_REGISTERS.findall(template):
            found.append(_found("inline_asm", line, f"asm reads {register}"))
        for instruction in re.split(r"[;\n]|\\n", template):
            mnemonic = instruction.strip().split(" ", 1)[0].split(".", 1)[0].lstrip("@!{}").strip()
            if mnemonic and not mnemonic.startswith(("%", "{", "}")) and mnemonic not in ALLOWED_PTX:
                found.append(_found("inline_asm", line, f"asm instruction {mnemonic!r}"))
    for offset, text in strings:
        register = SPECIAL_REGISTERS.search(text)
        line = _line(code, offset)
        if register and not any(f.line == line for f in found):
            found.append(_found("inline_asm", line, f"a string naming {register.group(0)}"))
    return found


def _launches(code: str) -> list[Finding]:
    found = []
    bound = {
        m.group(1)
        for m in re.finditer(
            r"\b(\w+)\s*=\s*(?:at|c10)::cuda::getCurrentCUDAStream\s*\(\s*\)(?:\s*\.\s*stream\s*\(\s*\))?\s*;", code
        )
    }
    assigned = {m.group(1) for m in re.finditer(r"\b(\w+)\s*=[^=]", code)}
    reassigned = {name for name in bound if len(re.findall(rf"\b{name}\s*=[^=]", code)) > 1}
    current = re.compile(r"^(?:(?:at|c10)::cuda::getCurrentCUDAStream\s*\(\s*\)(?:\s*\.\s*stream\s*\(\s*\))?)$")
    for start, config in _launch_configs(code):
        line = _line(code, start)
        parts = [p.strip() for p in _split_arguments(config)]
        if len(parts) != 4:
            found.append(_found("launch", line, f"<<<{config.strip()}>>> names {len(parts)} arguments"))
            continue
        stream = parts[3]
        if current.match(stream):
            continue
        if stream in bound and stream not in reassigned:
            continue
        why = "is assigned more than once" if stream in reassigned else "is not the current stream"
        if stream not in bound and stream in assigned:
            why = "is not bound to at::cuda::getCurrentCUDAStream()"
        found.append(_found("launch", line, f"the launch's stream {stream!r} {why}"))
    return found


def _launch_configs(code: str) -> list[tuple[int, str]]:
    """(offset, text between ``<<<`` and ``>>>``) of every launch, in one pass (no regex rescans)."""
    configs, at = [], code.find("<<<")
    while at >= 0:
        end = code.find(">>>", at + 3)
        if end < 0:
            break
        configs.append((at, code[at + 3 : end]))
        at = code.find("<<<", end + 3)
    return configs


def _split_arguments(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _entry(code: str, runtime: tuple[str, ...] | None, either: frozenset[str] = frozenset()) -> list[Finding]:
    found = []
    kernels = re.findall(r"\b__global__\b", code)
    entries = list(re.finditer(r"\blaunch\s*\(([^)]*)\)\s*\{", code))
    if not kernels:
        found.append(_found("entry", 1, "no __global__ kernel"))
    if len(entries) != 1:
        found.append(_found("entry", 1, f"{len(entries)} definitions of launch(...)"))
        return found
    entry = entries[0]
    line = _line(code, entry.start())
    # the declaration's words before the name: back to the statement or block before it
    before = code[max(0, entry.start() - 300) : entry.start()]
    declared = re.split(r"[;{}]|^\s*#.*$", before, flags=re.M)[-1].strip()
    if not declared or declared.split()[-1] != "void" or "__global__" in declared:
        found.append(_found("entry", line, f"launch is declared `{declared}`, not a void host function"))
    typed = _typed_params(entry.group(1))
    tensors = {name for kind, name in typed if TENSOR_TYPE.match(kind)}
    for kind, name in typed:
        if not (TENSOR_TYPE.match(kind) or SCALAR_TYPES.match(kind)):
            found.append(_found("signature", line, f"parameter {name or kind!r} of type {kind!r}"))
    if runtime is not None:
        if len(typed) != len(runtime):
            found.append(
                _found(
                    "signature",
                    line,
                    f"launch takes {len(typed)} parameters, the Triton kernel {len(runtime)} ({', '.join(runtime)})",
                )
            )
        else:
            for (kind, name), expected in zip(typed, runtime):
                if expected in either:
                    continue  # a parameter whose name does not say whether it is a pointer
                pointer = "ptr" in expected
                if pointer != bool(TENSOR_TYPE.match(kind)):
                    want = "a torch::Tensor" if pointer else "a scalar"
                    found.append(_found("signature", line, f"parameter {name!r} stands for {expected}, {want}"))
    start, body = _body(code, entry.end())  # the launcher's own body: where its tensors are used
    for name in tensors:
        for match in re.finditer(rf"\b{re.escape(name)}\s*(?:\.|->)\s*(\w+)", body):
            if match.group(1) not in ALLOWED_TENSOR_METHODS:
                found.append(_found("torch_op", _line(code, start + match.start()), f"{name}.{match.group(1)}"))
        # tensor arithmetic, indexing or assignment on the host: PyTorch compute (or a new tensor)
        for match in re.finditer(rf"(?<![\w.>])\b{re.escape(name)}\b\s*(?:[-+*/%^&|]=?(?![-+>])|\[|=(?!=))", body):
            found.append(
                _found(
                    "torch_op", _line(code, start + match.start()), f"{match.group(0).strip()} (host tensor arithmetic)"
                )
            )
        for match in re.finditer(rf"(?:[-+*/%^&|]|==?)\s*\b{re.escape(name)}\b(?!\s*(?:\.|->))", body):
            found.append(
                _found(
                    "torch_op", _line(code, start + match.start()), f"{match.group(0).strip()} (host tensor arithmetic)"
                )
            )
    return found


def _typed_params(text: str) -> list[tuple[str, str]]:
    """(type, name) of each parameter in a parameter list's text; a parameter without a name: (text, "")."""
    typed = []
    for param in (p.strip() for p in _split_arguments(text)):
        if param:
            bits = re.match(r"^(.*?)(\w+)$", param)
            typed.append((bits.group(1).strip(), bits.group(2)) if bits else (param, ""))
    return typed


@dataclass(frozen=True)
class LaunchFunction:
    """The one host ``launch(...)`` of a source, read from its scrubbed text (comments and literals blanked)."""

    code: str  # the whole scrubbed source: offsets and lines are the source's
    params: tuple[tuple[str, str], ...]  # (type, name) in order
    start: int  # the body's offset in ``code``
    body: str

    def line(self, offset: int) -> int:
        """The source line of ``offset`` into the body."""
        return _line(self.code, self.start + offset)

    @property
    def tensors(self) -> tuple[str, ...]:
        return tuple(name for kind, name in self.params if TENSOR_TYPE.match(kind))


def launch_function(source: str) -> LaunchFunction | None:
    """``source``'s host ``launch``, or None where it does not define exactly one (the entry rule's finding)."""
    code = _scrub(source).code
    entries = list(re.finditer(r"\blaunch\s*\(([^)]*)\)\s*\{", code))
    if len(entries) != 1:
        return None
    start, body = _body(code, entries[0].end())
    return LaunchFunction(code, tuple(_typed_params(entries[0].group(1))), start, body)


def _body(code: str, opened: int) -> tuple[int, str]:
    """(offset, text) of the block whose ``{`` ends just before ``opened``, to its matching ``}``."""
    depth = 1
    for i in range(opened, len(code)):
        if code[i] == "{":
            depth += 1
        elif code[i] == "}":
            depth -= 1
            if depth == 0:
                return opened, code[opened:i]
    return opened, code[opened:]


def cuda_findings(
    source: str, runtime: tuple[str, ...] | None = None, either: frozenset[str] = frozenset()
) -> list[Finding]:
    """Every broken rule of ``source``; ``runtime`` (the Triton kernel's runtime parameters) checks the slot:
    a ``torch::Tensor`` for each ``*ptr*`` name, a scalar for each other one but those in ``either``."""
    if len(source) > MAX_SOURCE_CHARS:
        return [_found("size", 1, f"source is {len(source):,} characters (limit {MAX_SOURCE_CHARS:,})")]
    scrubbed = _scrub(source)
    code = scrubbed.code
    return [
        *_preprocessor(code, source),
        *_denied_words(code),
        *_qualified(code),
        *_inline_asm(code, source, scrubbed.strings),
        *_launches(code),
        *_entry(code, runtime, either),
    ]


SKIP_RULE = "skip"
SKIP_EXPLANATION = (
    "a block returns early only past the end of its data (`if (row >= rows) return;`), never on its number's "
    "parity or value: that skips work"
)
_SKIPPING_TEST = re.compile(r"%|\^|==|!=|(?<![&|])[&|](?![&|=])")


def block_skip_findings(source: str) -> list[Finding]:
    """``if (...) return;`` whose test reads ``blockIdx`` with ``%``, ``&``, ``|``, ``^``, ``==`` or ``!=``: a
    kernel that leaves every other (or one chosen) block's rows unwritten. Bounds guards compare with
    ``<``/``>=`` and pass; what text cannot show (a guard against a halved bound) is gate 2's."""
    code = _scrub(source).code
    found = []
    for match in re.finditer(r"\bif\s*\(", code):
        depth, end = 1, match.end()
        while end < len(code) and depth:
            depth += {"(": 1, ")": -1}.get(code[end], 0)
            end += 1
        test = code[match.end() : end - 1]
        if re.match(r"\s*\{?\s*return\b", code[end:]) and "blockIdx" in test and _SKIPPING_TEST.search(test):
            found.append(
                Finding(
                    SKIP_RULE, _line(code, match.start()), f"if ({' '.join(test.split())}) return", SKIP_EXPLANATION
                )
            )
    return found


def check_static_cuda(candidate_source: str, *, kernel_name: str, original_source: str | None) -> Verdict:
    """Gate 1 for a CUDA C++ candidate of the Triton kernel ``kernel_name`` of ``original_source``.
    Reads the text only; nothing is compiled. With no original yet (before a capture, before
    ``kernelopt.load`` compiles anything) the slot contract waits until it is known. Raises
    ``ValueError`` only when the *original* (trusted) source is unusable."""
    if original_source is None:
        return findings_verdict(
            cuda_findings(candidate_source, None),
            PRIORITY,
            f"static checks passed for a CUDA C++ {kernel_name} (its slot is checked once the original is known)",
            {"language": "cuda", "kernel": kernel_name, "rules": list(CUDA_RULES)},
        )
    runtime = kernel_signature(original_source, kernel_name).runtime
    return findings_verdict(
        cuda_findings(candidate_source, runtime),
        PRIORITY,
        f"static checks passed for a CUDA C++ {kernel_name}; {len(CUDA_RULES)} rules, launch(...) fills its slot",
        {"language": "cuda", "kernel": kernel_name, "rules": list(CUDA_RULES), "runtime": list(runtime)},
    )
