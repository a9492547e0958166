"""Parse the text of an Inductor output-code module (the "wrapper").

Pure text processing, so it is tested on CPU against real captures kept as
fixtures. The wrapper holds one ``async_compile.triton(...)`` (CUDA) or
``async_compile.cpp_pybinding(...)`` (CPU) block per generated kernel and a
``call(args)`` body whose statements launch those kernels, vendor library calls
(``extern_kernels.mm/addmm/bmm/convolution`` → cuBLAS / cuDNN) and aten
fallbacks, in order.
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

LaunchKind = str  # "triton" | "cpp" | "vendor" | "aten"
GENERATED_KINDS = ("triton", "cpp")

_TRITON_RE = re.compile(r"^(\w+) = async_compile\.triton\('(\w+)', '''(.*?)''', device_str='(\w+)'\)", re.S | re.M)
_CPP_RE = re.compile(r"^(\w+) = async_compile\.cpp_pybinding\(\[(.*?)\], r'''(.*?)'''\)", re.S | re.M)
_EXTERN_RE = re.compile(r"\bextern_kernels\.(\w+)\(")
_ATEN_RE = re.compile(r"(?<![\w.])(?:torch\.ops\.)?aten\.(\w+)(?:\.(\w+))?\(")
_CPP_PARAMS_RE = re.compile(r'extern "C"\s+void\s+kernel\((.*?)\)', re.S)
_DECORATOR_KIND_RE = re.compile(r"@triton_heuristics\.(\w+)\(")
_SIZE_HINTS_RE = re.compile(r"size_hints=(\{[^{}]*\})")
_INDUCTOR_META_RE = re.compile(r"inductor_meta=(\{.*?\})\s*(?:,\s*\w+=|\)\s*\n)", re.S)


_BACKEND_HASH_RE = re.compile(r"'backend_hash': '[0-9A-Fa-f]*'")


def without_backend_hash(source: str) -> str:
    """A kernel's source without the Triton backend hash Inductor stamps on it, which follows the
    compiling process's environment (the ptxas it found): two processes' captures of one kernel
    differ only there."""
    return _BACKEND_HASH_RE.sub("", source)


def source_hash(source: str) -> str:
    """A source's hex sha256."""
    return hashlib.sha256(source.encode()).hexdigest()


def kernel_identity(source: str) -> str:
    """The identity of a generated kernel (hex sha256 of its source without the backend hash), used to
    refuse stale swaps. Two processes that compile one kernel under different compiler environments
    (the evaluation worker and ``kernelopt.load`` in the user's process) stamp it with different
    backend hashes: an identity over the full text made an H200 export fail to load in the very
    process that exported it."""
    return source_hash(without_backend_hash(source))


@dataclass(frozen=True)
class KernelParam:
    name: str
    constexpr: bool = False

    @property
    def reads(self) -> bool:
        return self.name.startswith(("in_ptr", "in_out_ptr"))

    @property
    def writes(self) -> bool:
        return self.name.startswith(("out_ptr", "in_out_ptr"))


@dataclass(frozen=True)
class KernelDef:
    """One generated kernel as it appears in the wrapper."""

    name: str
    language: str  # "triton" | "cpp"
    source: str
    params: tuple[KernelParam, ...]
    heuristic: str | None = None  # pointwise / reduction / persistent_reduction / template / ...
    mutated_arg_names: tuple[str, ...] = ()
    grid_type: str | None = None

    @property
    def sha256(self) -> str:
        return kernel_identity(self.source)

    def identified_by(self, sha256: str) -> bool:
        """Whether an address's ``sha256`` names this kernel: its identity, or the hash of its full
        text that exports and stores written before the identity left the backend hash out hold."""
        return sha256 in (self.sha256, source_hash(self.source))

    @property
    def runtime_params(self) -> tuple[KernelParam, ...]:
        """Parameters passed at launch (constexpr block sizes come from the config)."""
        return tuple(p for p in self.params if not p.constexpr)

    def written_params(self) -> set[str]:
        return {p.name for p in self.params if p.writes} | set(self.mutated_arg_names)


@dataclass(frozen=True)
class LaunchSite:
    """One launch statement of the wrapper's call body, in text order."""

    kind: LaunchKind
    name: str  # kernel name, "extern_kernels.addmm", "aten.sort.default"
    line: int
    text: str


@dataclass
class OutputCode:
    source: str
    kernels: dict[str, KernelDef] = field(default_factory=dict)
    launch_sites: list[LaunchSite] = field(default_factory=list)

    def kinds(self) -> list[LaunchKind]:
        return [s.kind for s in self.launch_sites]


def _triton_params(source: str, name: str) -> tuple[KernelParam, ...]:
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            params = []
            for arg in node.args.args:
                ann = ast.unparse(arg.annotation) if arg.annotation is not None else ""
                params.append(KernelParam(arg.arg, constexpr=ann.endswith("constexpr")))
            return tuple(params)
    raise ValueError(f"kernel source defines no function {name!r}")


def _cpp_params(source: str) -> tuple[KernelParam, ...]:
    m = _CPP_PARAMS_RE.search(source)
    if not m:
        return ()
    names = [p.strip().split()[-1].lstrip("*&") for p in m.group(1).split(",") if p.strip()]
    return tuple(KernelParam(n) for n in names)


def _inductor_meta(source: str) -> dict:
    m = _INDUCTOR_META_RE.search(source)
    if not m:
        return {}
    try:
        value = ast.literal_eval(m.group(1).replace("set()", "[]"))
    except (ValueError, SyntaxError):
        return {}
    return value if isinstance(value, dict) else {}


def size_hints(source: str) -> dict[str, int]:
    """The decorator's ``size_hints`` (each axis's extent rounded up to a power of two,
    e.g. ``{'x': 4096, 'r0_': 65536}``); empty when the source has none we can read."""
    m = _SIZE_HINTS_RE.search(source)
    if not m:
        return {}
    try:
        value = ast.literal_eval(m.group(1))
    except (ValueError, SyntaxError):
        return {}
    if not isinstance(value, dict):
        return {}
    return {str(k): int(v) for k, v in value.items() if isinstance(v, int)}


def triton_kernel_def(name: str, source: str) -> KernelDef:
    """A KernelDef from one Triton kernel module's source (as found in a wrapper, or a candidate)."""
    meta = _inductor_meta(source)
    kind = _DECORATOR_KIND_RE.search(source)
    return KernelDef(
        name=name,
        language="triton",
        source=source,
        params=_triton_params(source, name),
        heuristic=kind.group(1) if kind else None,
        mutated_arg_names=tuple(meta.get("mutated_arg_names", ())),
        grid_type=meta.get("grid_type"),
    )


def cpp_argtypes(source: str) -> dict[str, tuple[str, ...]]:
    """Each C++ kernel's argument types as its ``cpp_pybinding`` call names them, by variable."""
    return {var: tuple(ast.literal_eval(f"[{sig}]")) for var, sig, _ in _CPP_RE.findall(source)}


def parse_kernels(source: str) -> dict[str, KernelDef]:
    kernels: dict[str, KernelDef] = {}
    for var, name, body, _device in _TRITON_RE.findall(source):
        kernels[var] = triton_kernel_def(name, body)
    for var, _sig, body in _CPP_RE.findall(source):
        kernels[var] = KernelDef(name=var, language="cpp", source=body, params=_cpp_params(body))
    return kernels


def _call_body_lines(source: str) -> Iterable[tuple[int, str]]:
    """Lines after the last kernel definition: the call body and its helpers."""
    last = 0
    for m in list(_TRITON_RE.finditer(source)) + list(_CPP_RE.finditer(source)):
        last = max(last, m.end())
    start_line = source.count("\n", 0, last) + 1
    for i, line in enumerate(source[last:].splitlines(), start=start_line):
        stripped = line.strip()
        if stripped.startswith("#") or stripped.startswith("def benchmark_compiled_module"):
            if stripped.startswith("def benchmark_compiled_module"):
                return
            continue
        yield i, line


def parse_launch_sites(source: str, kernels: dict[str, KernelDef]) -> list[LaunchSite]:
    sites: list[LaunchSite] = []
    generated = {var: k.language for var, k in kernels.items()}
    call_re = re.compile(r"(?<![\w.])(\w+)(\.run)?\(")
    for lineno, line in _call_body_lines(source):
        for m in call_re.finditer(line):
            var, dot_run = m.group(1), m.group(2)
            if var in generated and (dot_run or generated[var] == "cpp"):
                sites.append(LaunchSite(generated[var], kernels[var].name, lineno, line.strip()))
        for m in _EXTERN_RE.finditer(line):
            sites.append(LaunchSite("vendor", f"extern_kernels.{m.group(1)}", lineno, line.strip()))
        for m in _ATEN_RE.finditer(line):
            op = f"aten.{m.group(1)}" + (f".{m.group(2)}" if m.group(2) else "")
            sites.append(LaunchSite("aten", op, lineno, line.strip()))
    return sites


def parse_output_code(source: str) -> OutputCode:
    """Kernels and launch sites of one wrapper module's text."""
    kernels = parse_kernels(source)
    return OutputCode(source=source, kernels=kernels, launch_sites=parse_launch_sites(source, kernels))
