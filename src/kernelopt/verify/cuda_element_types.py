"""Gate 1's element-type rule for CUDA C++ in a kernel file's slot: each tensor read as its own dtype.

The C++ ``launch`` gets each pointer argument of the Triton kernel as a ``torch::Tensor`` and takes
its data pointer itself, so the element type it reads a tensor as is written in the source. A
``float*`` over a bfloat16 tensor reads pairs of values as one, past the end of the buffer: the
slot's names say which parameter is a tensor, not what it holds, so the type is checked against
the dtype of the tensor the file's own ``launch`` passes there (the judge records it on the file's
inputs, :func:`kernelopt.capture.cuda_slot.slot_dtypes`). For every tensor parameter whose dtype
is known, in ``launch``'s own body:

* a *typed read*, ``x_ptr.data_ptr<T>()`` (or ``const_data_ptr`` / ``mutable_data_ptr``), or a cast
  of an untyped one, ``(T*) x_ptr.data_ptr()``, ``static_cast<T*>(...)``, ``reinterpret_cast<T*>(...)``,
  must name a C++ type of the tensor's dtype (:data:`ELEMENT_TYPES`: ``float`` for float32,
  ``at::Half`` / ``__half`` / ``half`` for float16, ``at::BFloat16`` / ``__nv_bfloat16`` for bfloat16,
  ``int64_t`` / ``long`` for int64, ...); a CUDA vector type counts as its element (``float4`` is
  ``float``), and ``using`` / ``typedef`` aliases are followed. What the typed pointer is cast to
  after (``reinterpret_cast<const uint4*>(x_ptr.data_ptr<at::BFloat16>())`` for wide loads) is free;
* a read gate 1 cannot type is refused, with the fix: an untyped ``data_ptr()`` under no cast (a
  ``void*``), or a type the table does not hold: a template parameter, an alias of one, a raw type
  (``uint4``, ``char``). Reading as ``data_ptr<T>()`` with the dtype's ``T``, then casting, always passes;
* a tensor passed on whole (``helper(x_ptr)``) is refused: its reads are out of this rule's sight;
* a tensor whose data is never read (only its sizes) passes. A dispatch on ``scalar_type()`` that
  also reads other types is refused for those: the slot's tensors have the dtypes recorded.

Where a dtype is not known, nothing is compared for that parameter: a dtype outside the table
(complex, fp8 without its CUDA type), the launch's calls disagreeing on it, and gate 1 run before
the file has run (``kernelopt verify``'s first check, ``load_kernel``'s re-check of a delivery);
the judge's gate 1, which every evaluated candidate passes through, always has the dtypes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from kernelopt.verify.static_cuda import LaunchFunction, launch_function
from kernelopt.verify.static_findings import Finding

RULE = "dtype"
EXPLANATION = (
    "launch() reads each tensor as its dtype's element type, as x_ptr.data_ptr<T>() (or a cast of "
    "x_ptr.data_ptr()), inside launch() itself"
)
# A tensor's dtype (torch's name) -> the C++ spellings of its element type, the most usual first.
ELEMENT_TYPES: dict[str, tuple[str, ...]] = {
    "float32": ("float",),
    "float64": ("double",),
    "float16": ("at::Half", "__half", "half", "c10::Half"),
    "bfloat16": ("at::BFloat16", "__nv_bfloat16", "c10::BFloat16", "nv_bfloat16"),
    "float8_e4m3fn": ("__nv_fp8_e4m3",),
    "float8_e5m2": ("__nv_fp8_e5m2",),
    "int64": ("int64_t", "long", "long int", "long long", "long long int", "signed long", "signed long long"),
    "int32": ("int32_t", "int", "signed", "signed int"),
    "int16": ("int16_t", "short", "short int", "signed short"),
    "int8": ("int8_t", "signed char"),
    "uint64": ("uint64_t", "unsigned long", "unsigned long long"),
    "uint32": ("uint32_t", "unsigned", "unsigned int"),
    "uint16": ("uint16_t", "unsigned short"),
    "uint8": ("uint8_t", "unsigned char"),
    "bool": ("bool",),
}
# CUDA's vector types: element type -> its vectors (a float4 load of a float tensor reads floats).
VECTORS: dict[str, tuple[str, ...]] = {
    "float": ("float2", "float4"),
    "double": ("double2",),
    "__half": ("__half2", "half2"),
    "half": ("__half2", "half2"),
    "__nv_bfloat16": ("__nv_bfloat162", "nv_bfloat162"),
    "nv_bfloat16": ("__nv_bfloat162", "nv_bfloat162"),
    "int": ("int2", "int4"),
    "int32_t": ("int2", "int4"),
    "int64_t": ("longlong2",),
    "long long": ("longlong2",),
}
_DATA = r"(?:data_ptr|const_data_ptr|mutable_data_ptr)"
_QUALIFIERS = re.compile(r"\b(?:const|volatile|__restrict__|__restrict|struct)\b")
_OPEN = r"\s*\(?\s*$"  # what may stand between a cast and the data_ptr call it applies to
_AFTER_STAR = r"\s*\*\s*(?:(?:const|__restrict__|__restrict)\s*)*"  # float* const, float* __restrict__
_POINTER_CAST = re.compile(
    rf"(?:(?:static_cast|reinterpret_cast)\s*<\s*(?P<cpp>[\w:\s]+?){_AFTER_STAR}>\s*\("
    rf"|\(\s*(?P<c>[\w:\s]+?){_AFTER_STAR}\))" + _OPEN
)
# the pointer as a number (an alignment test): no element is read through it
_ADDRESS_CAST = re.compile(
    r"(?:reinterpret_cast\s*<\s*(?:std::)?(?:uintptr_t|intptr_t|size_t|uint64_t)\s*>\s*\("
    r"|\(\s*(?:std::)?(?:uintptr_t|intptr_t|size_t)\s*\))" + _OPEN
)
_CONTEXT = 200  # characters before a data_ptr call searched for its cast


def _normalized(cpp: str) -> str:
    """A C++ type's name without qualifiers and extra spaces (``const at::Half`` -> ``at::Half``)."""
    return " ".join(_QUALIFIERS.sub(" ", cpp).split()).removeprefix("::")


def _aliases(code: str) -> dict[str, str]:
    """``using A = T;`` and ``typedef T A;`` of the source; a name defined twice, differently, is no alias."""
    found: dict[str, set[str]] = {}
    for match in re.finditer(r"\busing\s+(\w+)\s*=\s*([^;]+);", code):
        found.setdefault(match.group(1), set()).add(_normalized(match.group(2)))
    for match in re.finditer(r"\btypedef\s+([^;]+?)\s+(\w+)\s*;", code):
        found.setdefault(match.group(2), set()).add(_normalized(match.group(1)))
    return {name: next(iter(types)) for name, types in found.items() if len(types) == 1}


def _resolved(cpp: str, aliases: Mapping[str, str]) -> str:
    cpp = _normalized(cpp)
    for _ in range(8):  # an alias of an alias, never a cycle
        if cpp not in aliases:
            break
        cpp = aliases[cpp]
    return cpp


def accepted(dtype: str) -> frozenset[str]:
    """The C++ element types (vectors included) a tensor of ``dtype`` may be read as."""
    names = ELEMENT_TYPES.get(dtype, ())
    return frozenset([*names, *(vector for name in names for vector in VECTORS.get(name, ()))])


KNOWN = frozenset(cpp for dtype in ELEMENT_TYPES for cpp in accepted(dtype))


@dataclass(frozen=True)
class _Read:
    """One data read of a tensor in ``launch``: where, as what C++ type (None: untyped), in what text."""

    offset: int
    cpp: str | None
    text: str


def _template_argument(body: str, opened: int) -> tuple[str, int] | None:
    """The text between the ``<`` at ``opened`` and its matching ``>``, and the offset after it."""
    depth = 0
    for i in range(opened, len(body)):
        if body[i] == "<":
            depth += 1
        elif body[i] == ">":
            depth -= 1
            if depth == 0:
                return body[opened + 1 : i], i + 1
        elif body[i] in ";{}":
            break
    return None


def _reads(launch: LaunchFunction, name: str) -> list[_Read]:
    """Each data read of tensor ``name`` in ``launch``'s body (an address taken as a number is none)."""
    body = launch.body
    reads = []
    for match in re.finditer(rf"\b{re.escape(name)}\s*(?:\.|->)\s*{_DATA}\b\s*", body):
        call = " ".join(body[match.start() : match.end()].split())
        if body.startswith("<", match.end()):
            argument = _template_argument(body, match.end())
            cpp = argument[0] if argument else None
            reads.append(_Read(match.start(), cpp, f"{call}<{' '.join((cpp or '').split())}>()"))
            continue
        before = body[max(0, match.start() - _CONTEXT) : match.start()]
        if _ADDRESS_CAST.search(before):
            continue
        cast = _POINTER_CAST.search(before)
        reads.append(_Read(match.start(), (cast.group("cpp") or cast.group("c")) if cast else None, f"{call}()"))
    return reads


def _passed_whole(launch: LaunchFunction, name: str) -> list[int]:
    """Offsets where ``launch``'s body uses tensor ``name`` other than through ``.``/``->`` (a call's
    argument, a lambda's capture)."""
    return [m.start() for m in re.finditer(rf"(?<![\w.>:])\b{re.escape(name)}\b(?!\s*(?:\.|->))", launch.body)]


def _construct(read: _Read, name: str, shown: str, dtype: str, aliases: Mapping[str, str]) -> str | None:
    """What is wrong with ``read`` of the ``dtype`` tensor ``name`` (``shown`` so), or None where nothing is."""
    usual = ELEMENT_TYPES[dtype]
    fix = f"read it as {name}.data_ptr<{usual[0]}>()"
    if read.cpp is None:
        return f"{read.text} reads the {dtype} tensor {shown} as void*; {fix}"
    cpp = _resolved(read.cpp, aliases)
    if cpp in accepted(dtype):
        return None
    written = _normalized(read.cpp)
    alias = f" ({written} is {cpp})" if cpp != written else ""
    unknown = "" if cpp in KNOWN else ", a type gate 1 does not know (a template parameter?)"
    spelled = " or ".join(usual[:2])
    return f"{read.text} reads the {dtype} tensor {shown} as {cpp}*{alias}{unknown}; {fix} ({spelled})"


def element_type_findings(source: str, runtime: tuple[str, ...], dtypes: Mapping[str, str]) -> list[Finding]:
    """Each tensor of ``source``'s ``launch`` read as another element type than its dtype in ``dtypes``
    (the Triton kernel's parameter name -> torch's dtype name, ``bfloat16``), or read so that gate 1
    cannot tell. Parameters are matched by position, as the slot passes them."""
    launch = launch_function(source)
    if launch is None or len(launch.params) != len(runtime):
        return []  # the entry and signature rules say what is wrong
    aliases = _aliases(launch.code)
    found = []
    for (_kind, name), parameter in zip(launch.params, runtime):
        dtype = dtypes.get(parameter, "")
        if name not in launch.tensors or dtype not in ELEMENT_TYPES:
            continue
        shown = name if name == parameter else f"{name} (the kernel's {parameter})"
        for read in _reads(launch, name):
            construct = _construct(read, name, shown, dtype, aliases)
            if construct is not None:
                found.append(Finding(RULE, launch.line(read.offset), construct, EXPLANATION))
        for offset in _passed_whole(launch, name):
            construct = (
                f"the {dtype} tensor {shown} is passed on whole, where this rule cannot follow its reads; "
                f"read it here as {name}.data_ptr<{ELEMENT_TYPES[dtype][0]}>()"
            )
            found.append(Finding(RULE, launch.line(offset), construct, EXPLANATION))
    return found
