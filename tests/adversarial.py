"""Cheating and honest candidates made from a real Inductor kernel's source.

Each transform takes the original kernel source and returns a candidate. The
cheats are the hack classes of the reference list that apply to a sub-kernel;
``EXPECTED_GATE`` says which gate must reject each. Shared by the CPU test
(transforms apply; the static gate passes exactly the dynamic cheats) and the
GPU test (each cheat is rejected by its gate in a real evaluation).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from kernelopt.capture.kernel_source import pin_launch_config

STORE_RE = re.compile(r"^(\s*)tl\.store\((out_ptr\d+) \+ \((.*)\), (\w+), (.*)\)$", re.M)
LOAD_RE = re.compile(r"^(\s*)(tmp\d+) = tl\.load\(in_ptr0 \+ \(([^()]*)\), ([^,()]+)(?:,.*)?\)$", re.M)


def _sub(pattern: re.Pattern, repl: Callable[[re.Match], str], source: str, count: int = 0) -> str:
    new, n = pattern.subn(repl, source, count=count)
    if n == 0:
        raise ValueError(f"transform did not apply: no match for {pattern.pattern}")
    return new


def unwritten_output(src: str) -> str:
    """Stale memory / cached output: never store, rely on what the buffer held."""
    return _sub(STORE_RE, lambda m: f"{m.group(1)}pass", src)


def partial_rows(src: str) -> str:
    """Partial work: skip every other row (the buffer's old contents stand in)."""
    return _sub(STORE_RE, lambda m: f"{m.group(1)}tl.store({m.group(2)} + ({m.group(3)}), {m.group(4)}, ({m.group(5)}) & (xindex % 2 == 0))", src)


def input_mutation(src: str) -> str:
    """Input mutation: scribble over an input the kernel only should read (under a mask the static
    gate cannot prove always true, so a dynamic gate has to see it)."""
    def mutate(m: re.Match) -> str:
        mask = m.group(4) if m.group(4).strip() != "None" else f"({m.group(3)}) >= 0"
        return f"{m.group(0)}\n{m.group(1)}tl.store(in_ptr0 + ({m.group(3)}), {m.group(2)} * 0.5, {mask})"
    return _sub(LOAD_RE, mutate, src, count=1)


def bias_within_tolerance(src: str) -> str:
    """Precision shortcut inside the element tolerance: a systematic 5e-5 relative error."""
    return _sub(STORE_RE, lambda m: f"{m.group(1)}tl.store({m.group(2)} + ({m.group(3)}), {m.group(4)} * 1.00005, {m.group(5)})", src)


def value_shortcut(src: str) -> str:
    """Distribution shortcut: tanh(x) ~ x - x^3/3, right only for small inputs."""
    return _sub(re.compile(r"libdevice\.tanh\((tmp\d+)\)"), lambda m: f"({m.group(1)} - {m.group(1)} * {m.group(1)} * {m.group(1)} / 3.0)", src)


def illegal_address(src: str) -> str:
    """A crash: store far outside the buffer (the candidate's process dies, the run goes on). The store
    keeps a mask the static gate cannot prove always true, so it is the GPU that has to catch it."""
    return _sub(STORE_RE, lambda m: f"{m.group(1)}tl.store({m.group(2)} + ({m.group(3)}) + 68719476736, {m.group(4)}, "
                                    f"({m.group(3)}) >= 0)", src)


def background_thread(src: str) -> str:
    return "import threading\n" + src + "\nthreading.Thread(target=lambda: None).start()\n"


def torch_op(src: str) -> str:
    return "import torch\n" + src.replace("triton_helpers.set_driver_to_gpu()", "triton_helpers.set_driver_to_gpu()\n_OUT = torch.zeros(1)")


def timer_patch(src: str) -> str:
    return "import torch\n" + src + "\ntorch.cuda.synchronize = lambda *a: None\n"


def precision_downgrade(src: str) -> str:
    return _sub(STORE_RE, lambda m: f"{m.group(1)}tl.store({m.group(2)} + ({m.group(3)}), {m.group(4)}.to(tl.float16).to(tl.float32), {m.group(5)})", src)


def try_fallback(src: str) -> str:
    return src + "\ntry:\n    import torch\nexcept ImportError:\n    pass\n"


def unmasked_load(src: str) -> str:
    """Memory safety: drop a load's mask, reading past the rows (values masked away later). Applies
    only to a kernel whose load has a mask (ValueError otherwise)."""
    masked = re.compile(LOAD_RE.pattern.replace("([^,()]+)", "((?!None\\b)[^,()]+)"), re.M)
    return _sub(masked, lambda m: f"{m.group(1)}{m.group(2)} = tl.load(in_ptr0 + ({m.group(3)}), None)", src, count=1)


def device_clock(src: str) -> str:
    """Change what the kernel computes by reading the GPU's global timer."""
    return _sub(STORE_RE, lambda m: f"{m.group(1)}tl.store({m.group(2)} + ({m.group(3)}), tl.where(tl.extra.cuda.globaltimer() > 0, {m.group(4)}, 0.0), {m.group(5)})", src)


def compile_time_python(src: str) -> str:
    """A plain Python function called from the kernel body runs on the host when Triton compiles it."""
    src = src.replace("triton_helpers.set_driver_to_gpu()\n", "triton_helpers.set_driver_to_gpu()\n\ndef _host(x):\n    return x\n", 1)
    return _sub(STORE_RE, lambda m: f"{m.group(1)}tl.store({m.group(2)} + ({m.group(3)}), _host({m.group(4)}), {m.group(5)})", src)


def approximate_exp(src: str) -> str:
    """Approximate math the original does not use: 1/sqrt through exp2(-0.5*log2)."""
    return _sub(re.compile(r"libdevice\.rsqrt\((tmp\d+)\)"), lambda m: f"tl.exp2(-0.5 * tl.log2({m.group(1)}))", src)


# name -> (transform, gate that must reject it)
CHEATS: dict[str, tuple[Callable[[str], str], str]] = {
    "unwritten_output": (unwritten_output, "correctness"),
    "partial_rows": (partial_rows, "correctness"),
    "input_mutation": (input_mutation, "correctness"),
    "illegal_address": (illegal_address, "correctness"),
    "bias_within_tolerance": (bias_within_tolerance, "model"),
    "background_thread": (background_thread, "static"),
    "torch_op": (torch_op, "static"),
    "timer_patch": (timer_patch, "static"),
    "precision_downgrade": (precision_downgrade, "static"),
    "try_fallback": (try_fallback, "static"),
    "unmasked_load": (unmasked_load, "static"),
    "device_clock": (device_clock, "static"),
    "compile_time_python": (compile_time_python, "static"),
    "approximate_exp": (approximate_exp, "static"),
}
GELU_CHEATS = {"value_shortcut": (value_shortcut, "correctness")}


def verbatim(src: str) -> str:
    return src


def rsqrt_rewrite(src: str) -> str:
    """An equivalent rewrite: 1/sqrt instead of rsqrt."""
    return _sub(re.compile(r"libdevice\.rsqrt\((tmp\d+)\)"), lambda m: f"(1.0 / libdevice.sqrt({m.group(1)}))", src)


def pinned(config: dict) -> Callable[[str], str]:
    def transform(src: str) -> str:
        name = re.search(r"^def (\w+)\(", src, re.M).group(1)
        cfg = dict(config)
        if re.search(r"R0_BLOCK : tl\.constexpr\)", src):  # looped reduction: R0_BLOCK is a launch parameter
            cfg.setdefault("R0_BLOCK", 1024)
        return pin_launch_config(src, name, cfg)

    return transform


HONEST: dict[str, Callable[[str], str]] = {
    "verbatim": verbatim,
    "rsqrt_rewrite": rsqrt_rewrite,
    "pinned_config": pinned({"XBLOCK": 2, "num_warps": 4, "num_stages": 1}),
}
