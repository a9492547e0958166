"""The Coder: writes the replacement kernel for a plan, keeping the launcher's contract."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

from kernelopt.agents.roles.base import Role, RoleResult, assert_no_tensors
from kernelopt.agents.roles.context import kernel_view, launch_view
from kernelopt.agents.roles.models import KernelCandidate, Plan
from kernelopt.capture.output_code import KernelDef
from kernelopt.knowledge.card import Card

SLOT, FILE = "slot", "file"  # what a candidate replaces: one kernel in Inductor's launcher, or a whole kernel file


def contract_problem(source: str, kernel: KernelDef, language: str | None = None, target: str = SLOT) -> str | None:
    """Why ``source`` cannot replace ``kernel`` in its launcher, or None.

    A cheap pre-check run on every reply, so the model repairs a broken contract
    in the same conversation instead of costing an evaluation; the static gate
    checks the full rule set afterwards. ``language`` (the plan's) must match the
    reply's: CUDA C++ is known by its first line; its slot is checked by gate 1's
    C++ rules, whose first finding is the problem. For a kernel file (``target``
    :data:`FILE`, ``kernel.source`` the user's whole file, ``kernel.name`` its main kernel:
    a CUDA C++ reply's slot) the problem is the kernel-file gate's first finding.
    """
    from kernelopt.capture.cuda_kernel import CUDA_MARKER, is_cuda_source

    cuda = is_cuda_source(source)
    if language == "cuda" and not cuda:
        return f"source: the plan asks for CUDA C++: its first line must be `{CUDA_MARKER}`"
    if language == "triton" and cuda:
        what = "a Triton kernel file" if target == FILE else "a Triton kernel"
        return f"source: the plan asks for {what}, not CUDA C++"
    if target == FILE:
        from kernelopt.verify.static_kernel_file import check_static_file

        verdict = check_static_file("triton", source, original_source=kernel.source, kernel=kernel.name)
        return None if verdict.passed else f"source: {verdict.reason}"
    if cuda:
        from kernelopt.verify.static_cuda import check_static_cuda

        verdict = check_static_cuda(source, kernel_name=kernel.name, original_source=kernel.source)
        return None if verdict.passed else f"source: {verdict.reason}"
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return f"source: does not parse: line {exc.lineno}: {exc.msg}"
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == kernel.name), None)
    if fn is None:
        return f"source: must define the kernel function {kernel.name}(...) at the top level"
    decorators = [ast.unparse(d) for d in fn.decorator_list]
    if not any(d.split("(")[0] in ("triton.jit", "jit") for d in decorators):
        return f"source: {kernel.name} must keep its @triton.jit decorator"
    if kernel.heuristic and not any(d.startswith("triton_heuristics.") for d in decorators):
        return f"source: {kernel.name} must keep Inductor's @triton_heuristics decorator with its triton_meta and inductor_meta"
    runtime = [
        a.arg for a in fn.args.args if a.annotation is None or not ast.unparse(a.annotation).endswith("constexpr")
    ]
    expected = [p.name for p in kernel.runtime_params]
    if runtime != expected:
        return (
            f"source: {kernel.name} must take the runtime parameters ({', '.join(expected)}) in this order, "
            f"got ({', '.join(runtime)})"
        )
    return None


class Coder(Role[KernelCandidate]):
    name = "coder"
    output_model = KernelCandidate

    def run(
        self,
        plan: Plan,
        kernel: KernelDef,
        hardware: Card | None = None,
        launch: Mapping[str, Any] | None = None,
        target: str = SLOT,
    ) -> RoleResult[KernelCandidate]:
        """Implement ``plan`` as a complete replacement module for ``kernel`` (with ``target`` :data:`FILE`,
        a complete kernel file for the user's file ``kernel.source``, or with the plan's language ``cuda``
        CUDA C++ in the slot of its kernel ``kernel.name``)."""
        assert_no_tensors({"plan": plan, "kernel": kernel, "launch": launch})
        language = plan.language
        context = {
            "plan": plan,
            "kernel": kernel_view(kernel),
            "hardware": hardware,
            "launch": launch_view(launch),
            "language": language,
            "target": target,
        }
        return self.ask(context, lambda candidate: contract_problem(candidate.source, kernel, language, target))
