"""Gate 1 for a standalone Triton kernel file: the naive softmax passes against itself, honest rewrites
(autotuned, two kernels, a loop of launches, a `lambda meta:` grid) pass, and each cheat is refused by
the rule it targets."""

from __future__ import annotations

from pathlib import Path

import pytest
from static_cheats import assert_refused

from kernelopt.problem.file_kind import TRITON, file_kind
from kernelopt.verify.static_kernel_file import (
    KERNEL_FILE_RULES,
    check_static_kernel_file,
    kernel_file_facts,
    kernel_file_findings,
)
from kernelopt.verify.verdict import Verdict

ORIGINAL = '''"""Row softmax, one program per row."""
import torch
import triton
import triton.language as tl

ROWS = 4096
COLS = 8192


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(y_ptr + row * y_stride + cols, num / tl.sum(num, axis=0), mask=mask)


def launch(x):
    y = torch.empty_like(x)
    n_rows, n_cols = x.shape
    softmax_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(n_cols), num_warps=8)
    return y


def reference(x):
    return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(ROWS, COLS)]
'''
HEADER, _, _ = ORIGINAL.partition("@triton.jit")
TRUSTED = ORIGINAL[ORIGINAL.index("def reference") :]

AUTOTUNED = (
    HEADER
    + '''@triton.autotune(
    configs=[
        triton.Config({"ROWS_PER_PROGRAM": 1}, num_warps=4, num_stages=2),
        triton.Config({"ROWS_PER_PROGRAM": 4}, num_warps=8, num_stages=3),
    ],
    key=["n_cols"],
)
@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride, BLOCK: tl.constexpr, ROWS_PER_PROGRAM: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    for r in tl.static_range(ROWS_PER_PROGRAM):
        row = tl.program_id(0) * ROWS_PER_PROGRAM + r
        mask = (cols < n_cols) & (row < n_rows)
        x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=-float("inf"))
        num = tl.exp(x - tl.max(x, axis=0))
        tl.store(y_ptr + row * y_stride + cols, num / tl.sum(num, axis=0), mask=mask)


def launch(x):
    """Rows in blocks the autotuner picks."""
    assert x.is_contiguous() and x.ndim == 2, "a contiguous matrix"
    y = torch.empty_like(x)
    n_rows, n_cols = x.shape
    grid = lambda meta: (triton.cdiv(n_rows, meta["ROWS_PER_PROGRAM"]),)
    softmax_kernel[grid](x, y, n_rows, n_cols, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(n_cols))
    return y


'''
    + TRUSTED
)
TWO_KERNELS = (
    HEADER
    + """@triton.jit
def row_stats_kernel(x_ptr, max_ptr, sum_ptr, n_rows, n_cols, x_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=-float("inf"))
    m = tl.max(x, axis=0)
    tl.store(max_ptr + row, m, mask=row < n_rows)
    tl.store(sum_ptr + row, tl.sum(tl.exp(x - m), axis=0), mask=row < n_rows)


@triton.jit
def normalize_kernel(x_ptr, max_ptr, sum_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0)
    m = tl.load(max_ptr + row, mask=row < n_rows, other=0.0)
    s = tl.load(sum_ptr + row, mask=row < n_rows, other=1.0)
    tl.store(y_ptr + row * y_stride + cols, tl.exp(x - m) / s, mask=mask)


def launch(x):
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    row_max = torch.empty(n_rows, device=x.device, dtype=torch.float32)
    row_sum = torch.empty((n_rows,), device=x.device, dtype=torch.float32)
    block = max(16, triton.next_power_of_2(n_cols))
    row_stats_kernel[(n_rows,)](x, row_max, row_sum, n_rows, n_cols, x.stride(0), BLOCK=block)
    normalize_kernel[(n_rows,)](x, row_max, row_sum, y, n_rows, n_cols, x.stride(0), y.stride(0), BLOCK=block)
    return y


"""
    + TRUSTED
)
LOOP = (
    HEADER
    + """CHUNK = 1024


@triton.jit
def softmax_kernel(x_ptr, y_ptr, first_row, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    row = first_row + tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=-float("inf"))
    num = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * y_stride + cols, num / tl.sum(num, axis=0), mask=mask)


def launch(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    n_rows = x.size(0)
    n_cols = x.shape[-1]
    block = triton.next_power_of_2(n_cols)
    warps = 8 if block >= 2048 else 4
    for start in range(0, n_rows, CHUNK):
        rows = min(CHUNK, n_rows - start)
        softmax_kernel[(rows,)](x, y, start, n_cols, x.stride(0), y.stride(0), BLOCK=block, num_warps=warps)
    return y


"""
    + TRUSTED
)
LAMBDA_GRID = ORIGINAL.replace(
    "    softmax_kernel[(n_rows,)](",
    "    grid = lambda meta: (n_rows,)\n    softmax_kernel[grid](",
)
HONEST = {"original": ORIGINAL, "autotuned": AUTOTUNED, "two_kernels": TWO_KERNELS, "loop": LOOP, "lambda": LAMBDA_GRID}

LAUNCH = "    softmax_kernel[(n_rows,)]("
RETURN = "    return y\n"
ALLOC = "    y = torch.empty_like(x)\n"
STORE = "    tl.store(y_ptr + row * y_stride + cols, num / tl.sum(num, axis=0), mask=mask)\n"
JIT = "@triton.jit\ndef softmax_kernel("


def _verdict(source: str) -> Verdict:
    return check_static_kernel_file(source, original_source=ORIGINAL)


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_kernel_files_pass(name: str) -> None:
    verdict = _verdict(HONEST[name])
    assert verdict.passed, verdict.details.get("violations")
    assert verdict.details["level"] == "kernel_file" and verdict.details["rules"] == list(KERNEL_FILE_RULES)


def test_the_pass_names_the_kernels_and_the_original_facts_are_read() -> None:
    assert _verdict(TWO_KERNELS).details["kernels"] == ["normalize_kernel", "row_stats_kernel"]
    assert "launched by launch(x)" in _verdict(ORIGINAL).reason
    facts = kernel_file_facts(ORIGINAL)
    assert facts.params == ("x",) and set(facts.trusted_functions) == {"reference", "get_inputs"}
    assert kernel_file_findings(LOOP, facts) == []
    without = ORIGINAL[: ORIGINAL.index("def reference")]  # reference / get_inputs may be left out
    assert _verdict(without).passed


CHEATS: dict[str, tuple[str, str, str]] = {
    # PyTorch doing the work in launch
    "torch_softmax": ("torch_compute", RETURN, "    return torch.softmax(x, -1)\n"),
    "tensor_method": ("torch_compute", ALLOC, "    y = x.exp()\n"),
    "tensor_sum": ("torch_compute", RETURN, "    total = x.sum()\n" + RETURN),
    "tensor_arithmetic": ("torch_compute", ALLOC, "    y = torch.empty_like(x) + x\n"),
    "tensor_slice": ("torch_compute", ALLOC, "    y = torch.empty_like(x[:, :])\n"),
    "host_read": ("torch_compute", RETURN, "    first = x[0, 0].item()\n" + RETURN),
    "torch_functional": ("torch_compute", RETURN, "    return torch.nn.functional.softmax(x, -1)\n"),
    "tensor_as_size": ("torch_compute", ALLOC, "    y = torch.empty(x * 2)\n"),
    # writing a result into a tensor
    "copy": ("mutation", RETURN, "    y.copy_(x)\n" + RETURN),
    "subscript_write": ("mutation", RETURN, "    y[:] = x\n" + RETURN),
    "in_place_op": ("mutation", RETURN, "    y += 1\n" + RETURN),
    "out_argument": ("mutation", ALLOC, "    y = torch.empty_like(x)\n    torch.zeros(3, out=y)\n"),
    # timers, streams and other reaches outside
    "synchronize": ("timing", RETURN, "    torch.cuda.synchronize()\n" + RETURN),
    "capturing": ("capture", RETURN, "    recording = torch.cuda.is_current_stream_capturing()\n" + RETURN),
    "side_stream": (
        "context_manager",
        LAUNCH,
        "    side = torch.cuda.Stream()\n    with torch.cuda.stream(side):\n        softmax_kernel[(n_rows,)](",
    ),
    "getattr": ("introspection", RETURN, '    return getattr(torch, "softmax")(x, -1)\n'),
    "setattr": ("monkey_patch", RETURN, '    setattr(torch, "softmax", None)\n' + RETURN),
    "exec": ("dynamic_code", RETURN, '    exec("y = x")\n' + RETURN),
    "print": ("io", RETURN, "    print(n_cols)\n" + RETURN),
    "process": ("threads", RETURN, "    worker = torch.multiprocessing.Process(target=None)\n" + RETURN),
    "try_fallback": ("fallback", RETURN, "    try:\n        pass\n    except Exception:\n        pass\n" + RETURN),
    "class": ("class_def", "def launch(x):", "class Lazy(torch.Tensor):\n    pass\n\n\ndef launch(x):"),
    "device_clock": ("device_clock", STORE, STORE + "    t = tl.extra.cuda.globaltimer()\n"),
    # state kept across calls
    "cache_dict": (
        "global_state",
        "def launch(x):\n",
        '_CACHE = {}\n\n\ndef launch(x):\n    if "y" in _CACHE:\n        return _CACHE["y"]\n',
    ),
    "global": ("global_state", "def launch(x):\n", "_LAST = None\n\n\ndef launch(x):\n    global _LAST\n"),
    # the file's shape
    "import_os": ("import", "import torch\n", "import torch\nimport os\n"),
    "top_level_call": ("top_level", "ROWS = 4096\n", "ROWS = 4096\ntorch.manual_seed(0)\n"),
    "extra_function": (
        "top_level",
        "def launch(x):\n    y = torch.empty_like(x)\n",
        "def _softmax(x):\n    return torch.softmax(x, -1)\n\n\ndef launch(x):\n    y = _softmax(x)\n",
    ),
    "launch_signature": ("entry", "def launch(x):", "def launch(x, out):"),
    "changed_reference": ("original_only", "torch.softmax(x, dim=-1)", "x"),
    "changed_inputs": ("original_only", "torch.randn(ROWS, COLS)", "torch.randn(4, 4)"),
    "autotune_hook": (
        "autotune",
        JIT,
        '@triton.autotune(configs=[triton.Config({"X": 1})], key=["n_cols"], pre_hook=lambda args: None)\n' + JIT,
    ),
    "autotune_computed_config": (
        "autotune",
        JIT,
        '@triton.autotune(configs=[triton.Config({"X": ROWS})], key=["n_cols"])\n' + JIT,
    ),
    "heuristics": ("heuristics", JIT, '@triton.heuristics({"EVEN": lambda args: args["n_cols"] % 2 == 0})\n' + JIT),
    "jit_metadata_hook": ("decorator", JIT, "@triton.jit(launch_metadata=None)\ndef softmax_kernel("),
    # launch's own allow-list
    "reference_call": ("launch_call", ALLOC, "    y = reference(x)\n"),
    "kernel_run": ("kernel_launch", LAUNCH, "    softmax_kernel.run("),
    "int_grid": ("kernel_launch", LAUNCH, "    softmax_kernel[n_rows]("),
    "unknown_name": ("name", ALLOC, "    y = torch.empty_like(CACHED)\n"),
    "f_string": ("expression", RETURN, '    label = f"{n_cols}"\n' + RETURN),
    "while_loop": ("statement", RETURN, "    while False:\n        pass\n" + RETURN),
    "return_expression": ("return", RETURN, "    return y if n_rows else x\n"),
    "key_lambda": ("code_shape", RETURN, "    n = max(1, 2, key=lambda v: v)\n" + RETURN),
    # kernel bodies: the Inductor kernel gate's rules
    "unmasked_store": ("mask", STORE, STORE.replace(", mask=mask)", ")")),
    "inline_asm": (
        "inline_asm",
        STORE,
        '    num = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [num], dtype=tl.float32, is_pure=True, pack=1)\n'
        + STORE,
    ),
    "torch_in_kernel": ("torch_compute", STORE, "    num = torch.exp(num)\n" + STORE),
    "host_function_in_kernel": ("kernel_call", STORE, "    num = num.numpy()\n" + STORE),
    "value_attribute": ("value_access", STORE, "    handle = num.handle\n" + STORE),
    "module_internals": ("module_access", STORE, "    num = tl.core.exp(num)\n" + STORE),
    "computed_default": ("import_time", "BLOCK: tl.constexpr):", 'BLOCK: tl.constexpr = len("abcd")):'),
    "half_precision": ("precision", STORE, "    num = num.to(tl.float16)\n" + STORE),
}


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_each_cheat_is_refused_by_its_rule(name: str) -> None:
    assert_refused(_verdict, ORIGINAL, CHEATS[name], KERNEL_FILE_RULES)


def test_every_rule_has_a_cheat_and_bad_text_is_refused_not_raised() -> None:
    assert {rule for rule, _, _ in CHEATS.values()} | {"size", "syntax"} == set(KERNEL_FILE_RULES)
    assert _verdict("def launch(x:\n").details["rule"] == "syntax"
    assert _verdict("x" * 2_000_000).details["rule"] == "size"
    with pytest.raises(ValueError, match="defines no launch"):
        check_static_kernel_file(ORIGINAL, original_source="x = 1\n")


def _rules(source: str) -> set[str]:
    verdict = _verdict(source)
    assert not verdict.passed
    return {v["rule"] for v in verdict.details["violations"]}


def test_the_original_vouches_for_its_own_unmasked_accesses_inline_asm_and_heuristics() -> None:
    asm = '    num = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [num], dtype=tl.float32, is_pure=True, pack=1)\n'
    heuristics = '@triton.heuristics({"EVEN": lambda args: args["n_cols"] % 2 == 0})\n'
    trusting = ORIGINAL.replace(STORE, asm + STORE.replace(", mask=mask)", ")")).replace(JIT, heuristics + JIT)
    assert check_static_kernel_file(trusting, original_source=trusting).passed
    assert {"mask", "inline_asm", "heuristics"} <= _rules(trusting)  # the naive original vouches for none of them
    # ... and only for those: other assembly, other heuristics are refused
    other_asm = trusting.replace("mov.b32 $0, $1;", "mov.b32 $0, 0;")
    verdict = check_static_kernel_file(other_asm, original_source=trusting)
    assert not verdict.passed and verdict.details["rule"] == "inline_asm"
    other_heuristics = trusting.replace("% 2 == 0", "% 4 == 0")
    verdict = check_static_kernel_file(other_heuristics, original_source=trusting)
    assert not verdict.passed and verdict.details["rule"] == "heuristics"


def test_a_tensor_cannot_hide_behind_a_local_assigned_later_in_a_loop() -> None:
    # n is a size on the first iteration and the input tensor after it: n * 2 is tensor arithmetic
    hidden = LOOP.replace(
        "        rows = min(CHUNK, n_rows - start)\n",
        "        rows = min(CHUNK, n_rows - start)\n        doubled = warps * 2\n        warps = x\n",
    )
    assert "torch_compute" in _rules(hidden)


def test_the_grid_lambda_may_read_only_meta_names_and_sizes() -> None:
    assert "kernel_launch" in _rules(LAMBDA_GRID.replace("lambda meta: (n_rows,)", "lambda meta: (meta.get('X'),)"))
    assert "torch_compute" in _rules(LAMBDA_GRID.replace("lambda meta: (n_rows,)", "lambda meta: (x.sum(),)"))
    assert "kernel_launch" in _rules(LAMBDA_GRID.replace("lambda meta: (n_rows,)", "lambda meta: n_rows"))


# more ways around the rules, each with the rule that must be among the findings
EVASIONS: dict[str, tuple[str, str, str]] = {
    "tensor_through_a_branch": ("torch_compute", ALLOC, "    n = x if True else 1\n    z = n + 1\n" + ALLOC),
    "tensor_in_a_tuple": ("torch_compute", ALLOC, "    y = (x, x)[0]\n"),
    "int_of_a_tensor": ("torch_compute", RETURN, "    first = int(x)\n" + RETURN),
    "unpacking_a_tensor": ("torch_compute", RETURN, "    a, b = x\n" + RETURN),
    "truth_of_a_tensor": ("torch_compute", RETURN, "    if x:\n        pass\n" + RETURN),
    "tensor_loop_bound": ("torch_compute", RETURN, "    for i in range(x):\n        pass\n" + RETURN),
    "conversion": ("torch_compute", ALLOC, "    y = torch.empty_like(x.float())\n"),
    "data_pointer": ("torch_compute", RETURN, "    address = x.data_ptr()\n" + RETURN),
    "kernel_alias": ("kernel_launch", ALLOC, "    run = softmax_kernel\n" + ALLOC),
    "kernel_internals": ("kernel_launch", ALLOC, "    fn = softmax_kernel.fn\n" + ALLOC),
    "grid_with_a_default": ("kernel_launch", LAUNCH, "    softmax_kernel[lambda meta, f=print: (1,)]("),
    "launch_warmup": ("kernel_launch", "num_warps=8)", "num_warps=8, warmup=True)"),
    "launch_handle": ("kernel_launch", LAUNCH, "    handle = softmax_kernel[(n_rows,)]("),
    "grid_called": ("launch_call", RETURN, "    grid = lambda meta: (1,)\n    grid({})\n" + RETURN),
    "triton_runtime": ("launch_call", RETURN, "    s = triton.runtime.driver.active.get_current_stream()\n" + RETURN),
    "state_on_launch": ("mutation", RETURN, "    launch.last = y\n" + RETURN),
    "shadowed_module": ("name", ALLOC, "    torch = x\n" + ALLOC),
    "dunder_attribute": ("introspection", ALLOC, "    y = x.__class__(x)\n"),
    "import_in_launch": ("statement", ALLOC, "    import os\n" + ALLOC),
    "import_in_kernel": ("import", STORE, STORE + "    import os\n"),
    "jit_reference": ("original_only", "def reference(x):", "@triton.jit\ndef reference(x):"),
    "launch_defaults": ("entry", "def launch(x):", "def launch(x, cache={}):"),
    "second_launch": ("top_level", "def reference", "def launch(x):\n    return x\n\n\ndef reference"),
    "builtin_rebound": ("top_level", "ROWS = 4096\n", "ROWS = 4096\nmin = 3\n"),
    "constant_that_hangs_the_import": ("top_level", "ROWS = 4096\n", "ROWS = 10 ** 10 ** 10\n"),
    "autotune_pruning": (
        "autotune",
        JIT,
        '@triton.autotune(configs=[triton.Config({"X": 1})], key=["n"], prune_configs_by={"a": None})\n' + JIT,
    ),
    "autotune_do_bench": (
        "autotune",
        JIT,
        '@triton.autotune(configs=[triton.Config({"X": 1})], key=["n"], do_bench=None)\n' + JIT,
    ),
    "config_hook": (
        "autotune",
        JIT,
        '@triton.autotune(configs=[triton.Config({"X": 1}, pre_hook=None)], key=["n"])\n' + JIT,
    ),
    "configs_comprehension": (
        "autotune",
        JIT,
        '@triton.autotune(configs=[triton.Config({"X": b}) for b in (1, 2)], key=["n"])\n' + JIT,
    ),
    "jit_not_innermost": ("decorator", JIT, "@triton.jit\n@triton.autotune(configs=[], key=[])\ndef softmax_kernel("),
    "half_output": ("precision", ALLOC, "    y = torch.empty_like(x, dtype=torch.float16)\n"),
    "fast_math": ("precision", STORE, "    num = tl.extra.cuda.libdevice.fast_expf(num)\n" + STORE),
}


@pytest.mark.parametrize("name", sorted(EVASIONS))
def test_each_evasion_is_refused_by_its_rule(name: str) -> None:
    assert_refused(_verdict, ORIGINAL, EVASIONS[name], KERNEL_FILE_RULES)


IDIOMS: dict[str, tuple[str, str]] = {
    "checks": (ALLOC, '    assert x.is_cuda and x is not None, "a CUDA tensor"\n' + ALLOC),
    "allocation_keywords": (ALLOC, "    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)\n"),
    "strided_allocation": (ALLOC, "    y = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device)\n"),
    "memory_format": (ALLOC, "    y = torch.zeros_like(x, memory_format=torch.contiguous_format)\n"),
    "views": (ALLOC, "    x = x.reshape(-1, x.shape[-1]).contiguous()\n" + ALLOC),
    "branches": (ALLOC, "    if x.shape[-1] > 4096:\n        warps = 16\n    else:\n        warps = 8\n" + ALLOC),
    "shape_arithmetic": (
        ALLOC,
        "    shape = x.shape[:-1] + (x.shape[-1],)\n    y = torch.empty(shape, device=x.device)\n",
    ),
    "tuple_grid": (LAUNCH, "    grid = (n_rows, 1, 1)\n    softmax_kernel[grid]("),
    "tuple_return": (RETURN, "    return (y,)\n"),
    "language_import": ("import triton.language as tl\n", "from triton import language as tl\n"),
    "future_import": ("import torch\n", "from __future__ import annotations\n\nimport torch\n"),
    "triton_twice": ("import triton\n", "import triton\nimport triton.language\n"),
    "constants": ("ROWS = 4096\n", "ROWS = 4096\nBLK: tl.constexpr = 1024\nBLK2 = tl.constexpr(512)\nCFG = {'a': 1}\n"),
    "annotations": ("def launch(x):", "def launch(x: torch.Tensor) -> torch.Tensor:"),
    "loop_control": (
        RETURN,
        "    for i in range(3):\n        if i > 1:\n            break\n        continue\n" + RETURN,
    ),
    "counter": (RETURN, "    n_cols += 1\n" + RETURN),
    "math": (ALLOC, "    rows = math.prod(x.shape) // x.shape[-1]\n    half = math.ceil(rows / 2)\n" + ALLOC),
}


@pytest.mark.parametrize("name", sorted(IDIOMS))
def test_launch_idioms_pass(name: str) -> None:
    old, new = IDIOMS[name]
    source = ORIGINAL.replace("import torch\n", "import math\nimport torch\n") if name == "math" else ORIGINAL
    assert old in source
    verdict = _verdict(source.replace(old, new, 1))
    assert verdict.passed, verdict.details.get("violations")


EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "kernels"
TRITON_EXAMPLES = sorted(p for p in EXAMPLES.glob("*.py") if file_kind(p) == TRITON)


def test_the_triton_examples_are_found() -> None:
    assert {p.name for p in TRITON_EXAMPLES} >= {"softmax_naive.py", "scale_add_autotuned.py"}


@pytest.mark.parametrize("path", TRITON_EXAMPLES, ids=lambda p: p.stem)
def test_each_example_kernel_file_passes_against_itself(path: Path) -> None:
    source = path.read_text()
    verdict = check_static_kernel_file(source, original_source=source)
    assert verdict.passed, verdict.details.get("violations")
