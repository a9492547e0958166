"""Gate 1: static validation of a candidate kernel source.

A candidate is untrusted Python (written by an LLM or a user) that replaces one
Triton kernel Inductor generated. Before it is imported anywhere, this gate reads
its syntax tree and rejects every construct a kernel has no business containing:
PyTorch compute, fallback paths, threads, streams and timers, monkey-patching,
frame or globals inspection, dynamic code, file and network access, classes,
state kept across calls, precision the original does not use, and imports
outside a short allow-list. It also checks that the kernel keeps the name and
the launcher contract (decorators and parameter list) of the kernel it replaces.

It works on the ``ast`` tree, never on the text, so comments and strings can
neither hide a construct nor fake one. It is one layer of defence: what source
cannot show (stale memory, partial work, shape shortcuts, input mutation,
precision within tolerance) is left to the correctness, model and performance
gates, and candidates run in an isolated worker anyway.

This module holds the entry points and the order of the checks; each check has
its own module: the rules as data (:mod:`~kernelopt.verify.static_rules`), the
walker that applies them node by node (:mod:`~kernelopt.verify.static_walker`),
the module's top level (:mod:`~kernelopt.verify.static_module`), the kernel's
decorators and signature (:mod:`~kernelopt.verify.static_signature`), and kernel
bodies, import-time values, masks, inline assembly and the device clock
(:mod:`~kernelopt.verify.static_kernel`). :func:`check_static_candidate` is the
part that needs no original, for callers that must refuse before one is known.

Every finding names its line; the verdict's reason is the most serious finding,
and all findings are in ``details["violations"]``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

from kernelopt.verify.static_common import Violation
from kernelopt.verify.static_kernel import (
    AccessFacts,
    access_facts,
    access_violations,
    body_violations,
    clock_string_violations,
    import_time_violations,
)
from kernelopt.verify.static_module import top_level_violations
from kernelopt.verify.static_rules import MAX_SOURCE_CHARS, PRIORITY, RULES
from kernelopt.verify.static_signature import (
    KernelSignature,
    Param,
    kernel_signature,
    kernel_violations,
    top_functions,
)
from kernelopt.verify.static_walker import Walker
from kernelopt.verify.verdict import Verdict


@dataclass
class _Analysis:
    tree: ast.Module
    walker: Walker
    access: AccessFacts


def _analyze(source: str, original_imports: set[str], original_paths: set[str]) -> _Analysis:
    tree = ast.parse(source)
    walker = Walker(tree, original_imports, original_paths)
    walker.visit(tree)
    return _Analysis(tree, walker, access_facts(tree, walker.bound))


def _fail(violations: list[Violation], **extra: object) -> Verdict:
    ordered = sorted(set(violations), key=lambda v: (PRIORITY[v.rule], v.line, v.col, v.construct))
    primary = ordered[0]
    reason = primary.message
    if len(ordered) > 1:
        reason += f" (and {len(ordered) - 1} more finding{'s' if len(ordered) > 2 else ''})"
    return Verdict(
        "static", False, reason, {"rule": primary.rule, "violations": [v.to_dict() for v in ordered], **extra}
    )


def _shape_violations(analysis: _Analysis, trusted_paths: set[str]) -> list[Violation]:
    """Everything the candidate's module alone shows: forbidden constructs and the module's shape."""
    tree, walker = analysis.tree, analysis.walker
    return [
        *walker.violations,
        *top_level_violations(tree, walker.bound),
        *import_time_violations(tree, walker.bound),
        *body_violations(tree, walker.bound, trusted_paths),
        *clock_string_violations(tree),
    ]


def _candidate_violations(
    source: str, original: _Analysis, kernel_name: str, expected: KernelSignature
) -> list[Violation]:
    candidate = _analyze(source, original.walker.imports, original.walker.paths)
    walker = candidate.walker
    # A construct Inductor itself emitted in the original (a new helper call, a profiler
    # import) is trusted verbatim: the candidate is never held to more than its original.
    trusted = {(v.rule, v.construct) for v in _shape_violations(original, set())}
    violations = [
        v for v in _shape_violations(candidate, original.walker.paths) if (v.rule, v.construct) not in trusted
    ]
    violations += [v for token, v in walker.tokens.items() if token not in original.walker.tokens]
    violations += access_violations(candidate.tree, walker.bound, original.access)
    violations += kernel_violations(candidate.tree, walker.bound, kernel_name, expected)
    return violations


def _guarded(source: str, run: Callable[[], list[Violation]], kernel_name: str) -> Verdict | list[Violation]:
    if len(source) > MAX_SOURCE_CHARS:
        return _fail([Violation("size", 1, 0, f"source is {len(source):,} characters (limit {MAX_SOURCE_CHARS:,})")])
    try:
        return run()
    except SyntaxError as exc:
        return _fail([Violation("syntax", exc.lineno or 1, max((exc.offset or 1) - 1, 0), f"syntax error: {exc.msg}")])
    except ValueError as exc:  # e.g. null bytes
        return _fail([Violation("syntax", 1, 0, f"unparsable source: {exc}")])
    except RecursionError:
        return _fail([Violation("size", 1, 0, "source nests too deeply to analyse")])


def check_static(candidate_source: str, *, kernel_name: str, original_source: str) -> Verdict:
    """Gate 1: may ``candidate_source`` stand in for ``kernel_name`` of ``original_source``?

    Reads the syntax tree only; nothing is imported or executed. Raises
    ``ValueError`` only when the *original* (trusted) source is unusable. A CUDA C++
    candidate (its first line ``// kernelopt: cuda``) gets the C++ rules and the slot
    contract instead (:func:`kernelopt.verify.static_cuda.check_static_cuda`).
    """
    from kernelopt.capture.cuda_kernel import is_cuda_source

    if is_cuda_source(candidate_source):
        from kernelopt.verify.static_cuda import check_static_cuda

        return check_static_cuda(candidate_source, kernel_name=kernel_name, original_source=original_source)
    expected = kernel_signature(original_source, kernel_name)
    original = _analyze(original_source, set(), set())
    found = _guarded(
        candidate_source, lambda: _candidate_violations(candidate_source, original, kernel_name, expected), kernel_name
    )
    if isinstance(found, Verdict):
        return found
    if found:
        return _fail(found, kernel=kernel_name)
    return Verdict(
        "static",
        True,
        f"static checks passed for {expected.name}; {len(RULES)} rules, signature matches the original",
        {"kernel": kernel_name, "signature": str(expected), "rules": list(RULES)},
    )


CANDIDATE_ONLY_RULES = tuple(r for r in RULES if r not in ("precision", "mask", "inline_asm", "signature"))


def check_static_candidate(candidate_source: str, *, kernel_name: str) -> Verdict:
    """The part of gate 1 that needs no original: forbidden constructs and the module's shape.

    For callers that must refuse a candidate before the original kernel is known
    (before a capture is paid for, before an exported artifact is compiled). Rules
    relative to the original (precision, masks, inline asm, signature) are left to
    :func:`check_static`, which must still run once the original is known. A construct
    only Inductor's own original would vouch for is refused here. A CUDA C++ candidate gets
    the C++ rules, its slot left to :func:`check_static` once the original is known.
    """
    from kernelopt.capture.cuda_kernel import is_cuda_source

    if is_cuda_source(candidate_source):
        from kernelopt.verify.static_cuda import check_static_cuda

        return check_static_cuda(candidate_source, kernel_name=kernel_name, original_source=None)

    def run() -> list[Violation]:
        analysis = _analyze(candidate_source, set(), set())
        found = _shape_violations(analysis, set())
        functions = [f for f in top_functions(analysis.tree) if f.name == kernel_name]
        if not functions:
            found.append(Violation("kernel", 1, 0, f"defines no top-level function named {kernel_name}"))
        return [v for v in found if v.rule in CANDIDATE_ONLY_RULES]

    found = _guarded(candidate_source, run, kernel_name)
    if isinstance(found, Verdict):
        return found
    if found:
        return _fail(found, kernel=kernel_name)
    return Verdict(
        "static",
        True,
        f"candidate-only static checks passed for {kernel_name}",
        {"kernel": kernel_name, "rules": list(CANDIDATE_ONLY_RULES)},
    )


__all__ = [
    "CANDIDATE_ONLY_RULES",
    "MAX_SOURCE_CHARS",
    "RULES",
    "KernelSignature",
    "Param",
    "check_static",
    "check_static_candidate",
    "kernel_signature",
]
