"""Gate 1 for a graph candidate: its changed call sequence and each of its own kernels.

The call must pass the wrapper rules (:mod:`kernelopt.verify.static_wrapper`) against the
original graph's output code; each Triton kernel it brings must pass the candidate-only rules of
the kernel gate (there is no original kernel to compare it with: what it computes is the model
gate's to judge, as for the whole changed graph). C++ kernels are what Inductor writes for CPU
tensors: no rule reads C++ of that kind, so they are accepted only where the original graph is
itself a CPU graph (the CPU tests), never beside CUDA kernels and never from an exported file.
"""

from __future__ import annotations

from kernelopt.capture.call_sequence import wrapper_facts
from kernelopt.capture.cuda_kernel import is_cuda_source
from kernelopt.capture.graph_swap import GraphCandidate
from kernelopt.verify.static import check_static_candidate
from kernelopt.verify.static_wrapper import check_static_wrapper
from kernelopt.verify.verdict import Verdict


def check_static_graph(candidate: GraphCandidate, *, original_source: str, allow_cpp: bool = True) -> Verdict:
    """May ``candidate`` stand in for the call sequence of the graph whose output code is
    ``original_source``? ``allow_cpp=False`` (an exported file) refuses C++ kernels outright."""
    cpp = [k.name for k in candidate.kernels if k.language == "cpp"]
    if cpp and not (allow_cpp and wrapper_facts(original_source).cpp_kernels):
        return Verdict(
            "static",
            False,
            f"kernel {cpp[0]} is C++: a graph candidate's C++ kernels stand in only for a CPU graph's own, "
            "never from an exported file",
            {"rule": "kernel", "kernel": cpp[0]},
        )
    for kernel in candidate.kernels:
        if kernel.language == "cpp":
            continue
        if kernel.language != "triton" or is_cuda_source(kernel.source):
            return Verdict(
                "static",
                False,
                f"kernel {kernel.name} is {kernel.language}: a graph candidate brings Triton kernels",
                {"rule": "kernel", "kernel": kernel.name},
            )
        verdict = check_static_candidate(kernel.source, kernel_name=kernel.name)
        if not verdict.passed:
            return Verdict(
                "static",
                False,
                f"kernel {kernel.name} of the graph candidate: {verdict.reason}",
                {**verdict.details, "kernel": kernel.name},
            )
    wrapper = check_static_wrapper(
        candidate.call_source,
        original_source=original_source,
        candidate_kernels=[k.name for k in candidate.kernels if k.language == "triton"],
        candidate_cpp_kernels=cpp,
    )
    if not wrapper.passed:
        return wrapper
    return Verdict(
        "static",
        True,
        f"{wrapper.reason}; {len(candidate.kernels)} kernel(s) of its own passed the kernel rules"
        + (f" ({len(cpp)} C++ for CPU tensors, Inductor's)" if cpp else ""),
        {**wrapper.details, "level": "graph", "graph": candidate.graph},
    )
