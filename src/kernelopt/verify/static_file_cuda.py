"""Gate 1 for a CUDA C++ candidate in one ``@triton.jit`` kernel's slot of a standalone kernel file.

Such a candidate is the ``.cu`` source alone: the file's Python part (its ``launch``, ``reference``,
``get_inputs`` and the other kernels) is the user's original, byte for byte, and in the candidate's
process the slot kernel's name is rebound to the built source (:mod:`kernelopt.capture.cuda_slot`).
The slot is a kernel the original ``launch`` launches as ``name[grid](...)`` (a helper called from
another kernel is no slot). The C++ is held to :mod:`kernelopt.verify.static_cuda`'s rules against
that kernel's runtime parameters; since a kernel file's names need not say which parameter is a
pointer, only a ``*ptr*`` name must be a ``torch::Tensor`` and the other ones may be either (a
tensor passed where the C++ takes a scalar fails the call, at gate 2). Two rules more than a captured
kernel's: no early ``return`` on a test of ``blockIdx`` by parity or value (rows left unwritten), and,
where the judge knows the dtypes ``launch`` passes the slot, each tensor read as its own element type
(:mod:`kernelopt.verify.cuda_element_types`, which says why unknown types are refused).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping

from kernelopt.verify.cuda_element_types import EXPLANATION as ELEMENT_EXPLANATION
from kernelopt.verify.cuda_element_types import RULE as ELEMENT_RULE
from kernelopt.verify.cuda_element_types import element_type_findings
from kernelopt.verify.static_cuda import (
    CUDA_RULES,
    PRIORITY,
    SKIP_EXPLANATION,
    SKIP_RULE,
    block_skip_findings,
    cuda_findings,
)
from kernelopt.verify.static_findings import Finding, findings_verdict
from kernelopt.verify.static_kernel_file_rules import ENTRY
from kernelopt.verify.static_signature import kernel_signature
from kernelopt.verify.verdict import Verdict

FILE_CUDA_RULES = {
    "python": "the Python part of a CUDA C++ candidate is the original file, byte for byte",
    "slot": "a CUDA C++ candidate replaces one @triton.jit kernel that the file's launch() launches",
    **CUDA_RULES,
    ELEMENT_RULE: ELEMENT_EXPLANATION,
    SKIP_RULE: SKIP_EXPLANATION,
}
FILE_CUDA_PRIORITY = {"python": -2, "slot": -1, **PRIORITY, ELEMENT_RULE: len(PRIORITY), SKIP_RULE: len(PRIORITY) + 1}


def launched_kernels(original_source: str) -> list[str]:
    """The top-level functions the original's ``launch`` launches as ``name[grid](...)``, in order."""
    tree = ast.parse(original_source)
    functions = {s.name for s in tree.body if isinstance(s, ast.FunctionDef)}
    launches = [s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == ENTRY]
    names: list[str] = []
    for node in ast.walk(launches[-1]) if launches else ():
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Subscript)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in functions
            and node.func.value.id not in names
        ):
            names.append(node.func.value.id)
    return names


def resolve_slot(original_source: str, kernel: str | None) -> str:
    """The kernel a CUDA candidate replaces: ``kernel``, or the only one ``launch`` launches.
    ``ValueError`` (one line, with the fix) when there is none to choose or the choice is not one."""
    launched = launched_kernels(original_source)
    if kernel is not None:
        if kernel not in launched:
            raise ValueError(
                f"--kernel {kernel}: launch() launches no kernel of that name; name one of: "
                f"{', '.join(launched) or 'none'}"
            )
        return kernel
    if len(launched) != 1:
        raise ValueError(
            f"launch() launches {len(launched)} kernels ({', '.join(launched) or 'none'}): "
            "name the one the CUDA C++ candidate replaces with --kernel NAME"
        )
    return launched[0]


def slot_runtime(original_source: str, kernel: str) -> tuple[str, ...]:
    """The slot kernel's runtime parameters in order: what the C++ ``launch`` takes."""
    return kernel_signature(original_source, kernel).runtime


def check_static_file_cuda(
    candidate_source: str,
    *,
    original_source: str,
    kernel: str | None,
    python_source: str | None = None,
    dtypes: Mapping[str, str] | None = None,
) -> Verdict:
    """Gate 1 for the CUDA C++ ``candidate_source`` in the slot ``kernel`` (None: the only launched one) of
    the kernel file ``original_source``; ``python_source`` is the Python it will run inside where that is
    not the original by construction (a delivery read back from disk); ``dtypes``: the dtype of each tensor
    the file's ``launch`` passes the slot, by parameter name, where the file has run (the judge's gate 1)."""
    details: dict[str, object] = {"language": "cuda", "level": "kernel_file", "rules": list(FILE_CUDA_RULES)}
    found: list[Finding] = []
    if python_source is not None and python_source != original_source:
        found.append(Finding("python", 1, "the Python part differs from the original", FILE_CUDA_RULES["python"]))
    try:
        slot = resolve_slot(original_source, kernel)
    except ValueError as exc:
        found.append(Finding("slot", 1, str(exc), FILE_CUDA_RULES["slot"]))
        return findings_verdict(found, FILE_CUDA_PRIORITY, "", details)
    runtime = slot_runtime(original_source, slot)
    either = frozenset(name for name in runtime if "ptr" not in name)
    found += cuda_findings(candidate_source, runtime, either)
    found += element_type_findings(candidate_source, runtime, dtypes or {})
    found += block_skip_findings(candidate_source)
    typed = ", each tensor read as its dtype" if dtypes else ""
    return findings_verdict(
        found,
        FILE_CUDA_PRIORITY,
        f"static checks passed for CUDA C++ in the slot of {slot}; {len(FILE_CUDA_RULES)} rules, "
        f"launch({', '.join(runtime)}) fills it{typed} and the file's Python part is the original",
        {**details, "kernel": slot, "runtime": list(runtime), "dtypes": dict(dtypes or {})},
    )
