"""Gate 1 (static validation): the adversarial corpus, the rules one by one, signatures, reasons."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kernelopt.verify import RULES, KernelSignature, Verdict, check_static, kernel_signature
from kernelopt.verify.static import MAX_SOURCE_CHARS, check_static_candidate

CANDIDATES = Path(__file__).resolve().parent / "fixtures" / "candidates"
ORIGINAL = (CANDIDATES / "original_pointwise.py").read_text()
KERNEL = "triton_poi_fused_gelu_0"

# cheat file -> (rule that must be the reason, text the reason must contain)
CHEATS: dict[str, tuple[str, str]] = {
    "cheat_background_thread.py": ("threads", "threading.Thread"),
    "cheat_timer_patch_assign.py": ("monkey_patch", "assigns torch.cuda.synchronize"),
    "cheat_timer_patch_setattr.py": ("monkey_patch", "setattr"),
    "cheat_side_stream.py": ("timing", "torch.cuda.Stream"),
    "cheat_try_fallback.py": ("fallback", "try/except"),
    "cheat_torch_gelu.py": ("torch_compute", "calls torch.nn.functional.gelu"),
    "cheat_torch_aten.py": ("torch_compute", "calls torch.ops.aten.gelu"),
    "cheat_torch_alias.py": ("torch_compute", "torch.nn.functional.gelu"),
    "cheat_frame_inspection.py": ("introspection", "sys._getframe"),
    "cheat_getattr_string.py": ("introspection", "getattr"),
    "cheat_file_access.py": ("io", "open()"),
    "cheat_network.py": ("import", "socket"),
    "cheat_subprocess.py": ("import", "subprocess"),
    "cheat_lazy_output.py": ("class_def", "class LazyGeluOutput(torch.Tensor)"),
    "cheat_output_cache.py": ("global_state", "global _HITS"),
    "cheat_precision_fp16.py": ("precision", "tl.float16"),
    "cheat_fast_math.py": ("precision", "fast_expf"),
    "cheat_renamed_kernel.py": ("kernel", f"no top-level function named {KERNEL}"),
    "cheat_signature_dropped_xnumel.py": ("signature", "drops parameter xnumel"),
    "cheat_signature_reordered.py": ("signature", "(out_ptr0, in_ptr0, xnumel)"),
    "cheat_exec_string.py": ("dynamic_code", "exec()"),
    "cheat_eval_string.py": ("dynamic_code", "eval()"),
    "cheat_dunder_import.py": ("dynamic_code", "__import__"),
    "cheat_helper_reexport.py": ("module_access", "triton_helpers.triton.runtime"),
    "cheat_jit_calls_python_helper.py": ("kernel_call", "calls _runs_at_compile_time()"),
    "cheat_decorator_metadata_call.py": ("import_time", "triton_helpers.set_driver_to_gpu()"),
    "cheat_tl_core_builtins.py": ("module_access", "tl.core.builtins.setattr"),
    "cheat_expression_chain.py": ("value_access", ".handle of tl.arange(0, XBLOCK)"),
    "cheat_unmasked_load.py": ("mask", "unmasked load of in_ptr0 + (x0 + 1)"),
    "cheat_globaltimer.py": ("device_clock", "tl.extra.cuda.globaltimer"),
    "cheat_inline_asm_clock.py": ("device_clock", "%globaltimer"),
    "cheat_approx_exp.py": ("precision", "tl.exp"),
    "cheat_import_time_file_write.py": ("io", "open()"),
    "cheat_sys_modules.py": ("module_access", "libdevice.core.sys.modules"),
}
HONEST = [
    "original_pointwise.py",
    "honest_fixed_config.py",
    "honest_two_half_blocks.py",
    "honest_comments_and_strings.py",
]
REDUCTION = (CANDIDATES / "original_reduction.py").read_text()
REDUCTION_KERNEL = "triton_red_fused_add_div_linalg_vector_norm_0"
LINE_PREFIX = re.compile(r"^line (\d+): ")


def check(source: str, original: str = ORIGINAL, kernel: str = KERNEL) -> Verdict:
    return check_static(source, kernel_name=kernel, original_source=original)


def kernel_line(snippet: str) -> tuple[str, int]:
    """The original with ``snippet`` added at the end of the kernel, and the number of its first line."""
    return ORIGINAL.rstrip("\n") + "\n    " + snippet + "\n", len(ORIGINAL.rstrip("\n").splitlines()) + 1


def replace(old: str, new: str, source: str = ORIGINAL) -> str:
    assert old in source, old
    return source.replace(old, new, 1)


ORIGINAL_DEF = f"def {KERNEL}(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):"
ORIGINAL_DEF_LINE = ORIGINAL.splitlines().index(ORIGINAL_DEF) + 1


# -- the corpus -------------------------------------------------------------------------------


def test_corpus_is_complete() -> None:
    on_disk = {p.name for p in CANDIDATES.glob("*.py")}
    assert on_disk == set(CHEATS) | set(HONEST) | {"original_reduction.py"}, "list every fixture here"
    for name in CHEATS:
        first = (CANDIDATES / name).read_text().splitlines()[0]
        assert first.startswith("# hack: "), f"{name} must name its hack class on the first line"


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_cheat_is_rejected_with_a_precise_reason(name: str) -> None:
    rule, keyword = CHEATS[name]
    verdict = check((CANDIDATES / name).read_text())
    assert verdict.gate == "static"
    assert not verdict.passed
    assert verdict.details["rule"] == rule, verdict.reason
    assert keyword in verdict.reason, verdict.reason
    assert LINE_PREFIX.match(verdict.reason), verdict.reason
    assert "\n" not in verdict.reason


@pytest.mark.parametrize("name", HONEST)
def test_honest_candidate_passes(name: str) -> None:
    verdict = check((CANDIDATES / name).read_text())
    assert verdict.passed, verdict.reason
    assert verdict.details["kernel"] == KERNEL


def test_reason_points_at_the_offending_line() -> None:
    source = (CANDIDATES / "cheat_timer_patch_assign.py").read_text()
    verdict = check(source)
    line = int(LINE_PREFIX.match(verdict.reason).group(1))
    assert "torch.cuda.synchronize =" in source.splitlines()[line - 1]


def test_all_findings_are_in_details_sorted_by_priority() -> None:
    verdict = check((CANDIDATES / "cheat_side_stream.py").read_text())
    rules = [v["rule"] for v in verdict.details["violations"]]
    assert {"timing", "context_manager", "import", "top_level"} <= set(rules)
    order = list(RULES)
    assert [order.index(r) for r in rules] == sorted(order.index(r) for r in rules)
    assert all(LINE_PREFIX.match(v["message"]) for v in verdict.details["violations"])
    assert f"(and {len(rules) - 1} more findings)" in verdict.reason


def test_the_gate_never_executes_the_candidate(tmp_path: Path) -> None:
    marker = tmp_path / "executed"
    source = f"import os\nos.system('touch {marker}')\nopen({str(marker)!r}, 'w')\n" + ORIGINAL
    assert not check(source).passed
    assert not marker.exists()


# -- line numbers in reasons ------------------------------------------------------------------


@pytest.mark.parametrize(
    "snippet, rule, keyword",
    [
        ("tmp9 = torch.matmul(tmp0, tmp0)", "torch_compute", "calls torch.matmul"),
        ("tl.load = tl.store", "monkey_patch", "assigns tl.load"),
        ("g = globals()", "introspection", "globals()"),
        ("f = tmp0.__class__", "introspection", "__class__"),
        ("c = tl.load.__globals__", "introspection", "__globals__"),
        ("b = __builtins__", "introspection", "__builtins__"),
        ("fn = compile('1', 'x', 'eval')", "dynamic_code", "compile()"),
        ("v = vars(tl)", "introspection", "vars()"),
        ("delattr(tl, 'load')", "monkey_patch", "delattr()"),
        ("d = input()", "io", "input()"),
        ("print(tmp0)", "io", "print()"),
        ("tl.device_print('v', tmp0)", "io", "device_print"),
        ("tl.static_print(tmp0)", "io", "static_print"),
        ("breakpoint()", "introspection", "breakpoint()"),
        ("T = type('Lazy', (), {})", "class_def", "type()"),
        ("nonlocal tmp0", "global_state", "nonlocal tmp0"),
        ("with tl.static_range(2):\n        pass", "context_manager", "with tl.static_range(2)"),
        ("f = lambda v: v", "code_shape", "lambda"),
        ("yield tmp8", "code_shape", "yield"),
        ("e = tmp0.record_stream", "timing", "record_stream"),
        ("e = tl.elapsed_time", "timing", "elapsed_time"),
        ("fr = tmp0.f_back", "introspection", "f_back"),
        ("w = tmp0.wait_stream", "timing", "wait_stream"),
        ("c = tmp0.is_current_stream_capturing", "capture", "is_current_stream_capturing"),
        ("c = tmp0._cuda_isCurrentStreamCapturing", "capture", "_cuda_isCurrentStreamCapturing"),
        ("c = tmp0.make_graphed_callables", "capture", "make_graphed_callables"),
        ("t = tmp0.start_new_thread", "threads", "start_new_thread"),
        ("h = tmp0.to(tl.bfloat16)", "precision", "tl.bfloat16"),
        ("h = tmp0.to(tl.float8e4nv)", "precision", "tl.float8e4nv"),
        ("q = tl.dot(tmp0, tmp0, input_precision='tf32')", "precision", "'tf32'"),
        ("q = tl.dot(tmp0, tmp0, input_precision='tf32x3')", "precision", "tf32x3"),
        ("q = tl.dot(tmp0, tmp0, allow_tf32=True)", "precision", "allow_tf32=True"),
        ("q = tl.fdiv(tmp0, tmp1)", "precision", "tl.fdiv"),
        ("q = libdevice.fast_dividef(tmp0, tmp1)", "precision", "fast_dividef"),
        ("q = tl.inline_asm_elementwise('tanh.approx.f32 $0, $1;', '=r,r', [tmp0], tl.float32, True, 1)",
         "precision", "inline_asm_elementwise"),
        ("import os", "import", "imports os (file system and process access)"),
        ("import numpy", "import", "imports numpy"),
        ("from triton.testing import do_bench", "import", "do_bench from triton.testing"),
        ("from torch._inductor.runtime.triton_heuristics import grid", "import", "grid"),
        ("from . import sibling", "import", "relative module"),
        ("from triton.language import *", "import", "imports * from triton.language"),
        ("t = triton.testing.do_bench", "module_access", "uses triton.testing.do_bench"),
        ("t = triton.runtime.driver.active", "module_access", "triton.runtime"),
        ("t = triton_heuristics.CachingAutotuner", "module_access", "triton_heuristics.CachingAutotuner"),
        ("t = triton_helpers.set_driver_to_cpu", "module_access", "set_driver_to_cpu"),
        ("t = tl.core._semantic", "module_access", "tl.core._semantic"),
        ("t = libdevice.core.os", "module_access", "libdevice.core.os"),
        ("alias = triton", "module_access", "uses module triton as a value"),
        ("alias = tl", "module_access", "uses module tl as a value"),
        ("g = tl.core.getattr", "module_access", "tl.core.getattr"),
    ],
)
def test_rule_reason_names_line_and_construct(snippet: str, rule: str, keyword: str) -> None:
    source, line = kernel_line(snippet)
    verdict = check(source)
    assert not verdict.passed
    assert verdict.details["rule"] == rule, verdict.reason
    assert verdict.reason.startswith(f"line {line}: "), verdict.reason
    assert keyword in verdict.reason, verdict.reason


def test_syntax_error_reports_its_line() -> None:
    lines = ORIGINAL.splitlines()
    lines.insert(20, "    tmp9 = (tmp0 +")
    verdict = check("\n".join(lines))
    assert not verdict.passed and verdict.details["rule"] == "syntax"
    assert LINE_PREFIX.match(verdict.reason)
    assert "syntax error" in verdict.reason


def test_unparsable_and_oversized_sources_are_rejected() -> None:
    assert check("x = 1\0\n").details["rule"] == "syntax"
    deep = "x = " + "(" * 5000 + "1" + ")" * 5000 + "\n"
    assert not check(deep).passed
    long_chain = ORIGINAL + "X = " + "+".join(["1"] * 50_000) + "\n"
    verdict = check(long_chain)
    assert not verdict.passed and verdict.details["rule"] in ("size", "top_level")
    huge = ORIGINAL + "#" * MAX_SOURCE_CHARS
    verdict = check(huge)
    assert verdict.details["rule"] == "size" and verdict.reason.startswith("line 1: ")


# -- other kernel kinds and what the original may vouch for -----------------------------------


def test_reduction_kernel_passes_against_itself_and_keeps_its_contract() -> None:
    assert check(REDUCTION, original=REDUCTION, kernel=REDUCTION_KERNEL).passed
    pinned = replace("@triton_heuristics.reduction(\n    size_hints={'x': 32768, 'r0_': 65536},\n"
                     "    reduction_hint=ReductionHint.INNER,\n",
                     "@triton_heuristics.fixed_config(\n    config={'XBLOCK': 1, 'R0_BLOCK': 2048, 'num_warps': 8},\n",
                     REDUCTION)
    assert check(pinned, original=REDUCTION, kernel=REDUCTION_KERNEL).passed
    no_rnumel = replace("xnumel, r0_numel, XBLOCK", "xnumel, XBLOCK", REDUCTION)
    verdict = check(no_rnumel, original=REDUCTION, kernel=REDUCTION_KERNEL)
    assert verdict.details["rule"] == "signature" and "drops parameter r0_numel" in verdict.reason


PROTON = "import triton.profiler as proton\nimport triton.profiler.language as pl\npl.enable_semantic('triton')\n"


def test_constructs_inductor_emitted_in_the_original_are_trusted() -> None:
    original = PROTON + ORIGINAL
    assert check(original, original=original).passed
    assert check(ORIGINAL, original=original).passed
    different = original.replace("pl.enable_semantic('triton')", "pl.enable_semantic('cuda')")
    assert check(different, original=original).details["rule"] == "top_level"
    verdict = check(original)  # the plain original never imported the profiler
    assert verdict.details["rule"] == "import" and "triton.profiler" in verdict.reason


# -- comments and strings can neither hide nor fake ----------------------------------------


def test_forbidden_words_in_comments_and_strings_do_not_reject() -> None:
    source = replace("    tmp6 = 1.0\n", "    tmp6 = 1.0  # torch.matmul(x); import os; try: except: exec(\n")
    source = '"""import threading; torch.cuda.synchronize = None; global X"""\n' + source
    assert check(source).passed


def test_code_hidden_in_a_string_is_still_caught_through_its_runner() -> None:
    source, line = kernel_line("exec('tl.lo' + 'ad = None')")
    verdict = check(source)
    assert verdict.details["rule"] == "dynamic_code" and verdict.reason.startswith(f"line {line}:")


def test_builtin_names_reused_as_kernel_locals_are_not_builtins() -> None:
    source = replace("    tmp1 = 0.5\n", "    input = 0.5\n    tmp1 = input\n")
    assert check(source).passed
    # a comprehension variable does not make the name local to the kernel
    leaky, line = kernel_line("t = [0 for open in range(2)]\n    f = open('/etc/passwd')")
    verdict = check(leaky)
    assert verdict.details["rule"] == "io" and verdict.reason.startswith(f"line {line + 1}:")
    # ... and at module level a builtin is always the builtin
    assert check(ORIGINAL + "X = open\n").details["rule"] == "io"


# -- torch ------------------------------------------------------------------------------------


def test_dtype_references_are_allowed_but_not_calls() -> None:
    original = "import torch\n" + ORIGINAL
    ok = replace("    tmp6 = 1.0\n", "    tmp6 = 1.0\n    DT = torch.float32\n", original)
    assert check(ok, original=original).passed
    bad = replace("    tmp6 = 1.0\n", "    tmp6 = torch.tensor(1.0)\n", original)
    verdict = check(bad, original=original)
    assert verdict.details["rule"] == "torch_compute" and "calls torch.tensor" in verdict.reason


def test_import_torch_only_if_the_original_imports_it() -> None:
    verdict = check("import torch\n" + ORIGINAL)
    assert verdict.details["rule"] == "import"
    assert verdict.reason.startswith("line 1: imports torch, which the original kernel does not import")
    original = "import torch\n" + ORIGINAL
    assert check(original, original=original).passed


def test_torch_reached_through_an_alias_is_caught() -> None:
    original = "import torch\n" + ORIGINAL
    for snippet, keyword in [("F = torch.nn.functional", "references torch.nn.functional"),
                             ("m = torch", "uses module torch as a value"),
                             ("k = torch._C._cuda_getCurrentRawStream", "torch._C")]:
        source, line = kernel_line(snippet)
        verdict = check("import torch\n" + source, original=original)
        assert verdict.details["rule"] == "torch_compute", verdict.reason
        assert keyword in verdict.reason and verdict.reason.startswith(f"line {line + 1}:")


def test_allowlisted_inductor_decorator_through_torch_chain() -> None:
    original = "import torch\n" + ORIGINAL
    source = replace("@triton_heuristics.pointwise(", "@torch._inductor.runtime.triton_heuristics.pointwise(",
                     original)
    assert check(source, original=original).passed


# -- precision is relative to the original ----------------------------------------------------


def test_precision_tokens_the_original_uses_are_allowed() -> None:
    original = replace("    tmp6 = 1.0\n", "    tmp6 = tl.full([1], 1.0, tl.float16)\n")
    candidate = replace("    tmp1 = 0.5\n", "    tmp1 = tl.full([1], 0.5, tl.float16)\n", original)
    assert check(candidate, original=original).passed
    # ... but not one the original does not
    bf16 = replace("    tmp1 = 0.5\n", "    tmp1 = tl.full([1], 0.5, tl.bfloat16)\n", original)
    assert check(bf16, original=original).details["rule"] == "precision"


def test_half_pointer_in_triton_meta_is_a_downgrade() -> None:
    source = replace("'out_ptr0': '*fp32'", "'out_ptr0': '*fp16'")
    verdict = check(source)
    assert verdict.details["rule"] == "precision" and "'*fp16'" in verdict.reason


def test_ieee_dot_is_not_a_downgrade() -> None:
    source, _ = kernel_line("q = tl.dot(tmp0, tmp0, input_precision='ieee', allow_tf32=False)")
    assert check(source).passed


# -- top level --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "statement, keyword",
    [
        ("CACHE = {}", "CACHE = {}"),
        ("CACHE = []", "CACHE = []"),
        ("X = tl.arange(0, 4)", "X = tl.arange(0, 4)"),
        ("len('hello')", "runs len('hello')"),  # any call (print is caught as io too)
        ("if True:\n    pass", "top-level if statement"),
        ("for i in range(3):\n    pass", "top-level for statement"),
        ("tl = 3", "rebinds tl"),
        (f"from triton import jit as {KERNEL}", f"rebinds {KERNEL} by an import"),
        ("def helper(x):\n    return x", "defines function helper without @triton.jit"),
    ],
)
def test_top_level_is_restricted(statement: str, keyword: str) -> None:
    line = len(ORIGINAL.splitlines()) + 1
    verdict = check(ORIGINAL + statement + "\n")
    assert not verdict.passed
    assert verdict.details["rule"] == "top_level", verdict.reason
    assert keyword in verdict.reason and verdict.reason.startswith(f"line {line}:"), verdict.reason


@pytest.mark.parametrize(
    "statement",
    ["SCALE = 0.5", "SHAPE = (1, -2, 3.0)", "NAME = 'x'", "LOG2E: tl.constexpr = 1.4426950408889634",
     "BLOCK = tl.constexpr(128)", "import math", "from triton.language.extra import libdevice as ld",
     "from torch._inductor.runtime.triton_compat import libdevice as ld2", "from triton import cdiv, Config"],
)
def test_top_level_constants_and_imports_allowed(statement: str) -> None:
    assert check(statement + "\n" + ORIGINAL).passed


def test_helper_jit_functions_and_constexpr_if_are_allowed() -> None:
    helper = "@triton.jit\ndef _half(x, FLAG: tl.constexpr):\n    if FLAG:\n        return x * 0.5\n    return x\n\n"
    source = replace("    tmp2 = tmp0 * tmp1\n", "    tmp2 = _half(tmp0, True)\n", helper + ORIGINAL)
    assert check(source).passed


# -- kernel and decorators --------------------------------------------------------------------


def test_kernel_without_triton_jit_is_rejected() -> None:
    verdict = check(replace("@triton.jit\n", ""))
    assert verdict.details["rule"] == "kernel" and "@triton.jit" in verdict.reason
    assert verdict.reason.startswith(f"line {ORIGINAL_DEF_LINE - 1}:")


def test_kernel_must_keep_a_heuristics_decorator() -> None:
    start = ORIGINAL.index("@triton_heuristics.pointwise(")
    end = ORIGINAL.index("@triton.jit")
    verdict = check(ORIGINAL[:start] + ORIGINAL[end:])
    assert verdict.details["rule"] == "kernel" and "@triton_heuristics" in verdict.reason


def test_unknown_decorators_are_rejected() -> None:
    source = replace("@triton.jit\n", "@triton.jit\n@functools.lru_cache\n", "import functools\n" + ORIGINAL)
    verdict = check(source)
    assert any(v["rule"] == "kernel" and "functools.lru_cache" in v["message"] for v in verdict.details["violations"])
    hook = replace("@triton.jit\n", "@triton.jit(launch_metadata=len)\n")
    assert "@triton.jit(launch_metadata=len)" in check(hook).reason
    assert check(replace("@triton.jit\n", "@triton.jit(do_not_specialize=['xnumel'])\n")).passed
    twice = replace("@triton.jit\n", "@triton_heuristics.fixed_config(config={}, filename=__file__)\n@triton.jit\n")
    assert "2 @triton_heuristics decorators" in check(twice).reason


def test_inductor_meta_may_not_claim_another_kernel_name() -> None:
    source = replace("'kernel_name': 'triton_poi_fused_gelu_0'", "'kernel_name': 'triton_poi_fused_mul_1'")
    verdict = check(source)
    assert verdict.details["rule"] == "kernel" and "'triton_poi_fused_mul_1'" in verdict.reason
    meta_line = next(i for i, text in enumerate(ORIGINAL.splitlines(), 1) if "inductor_meta=" in text)
    assert verdict.reason.startswith(f"line {meta_line}:")


def test_kernel_defined_twice_is_rejected() -> None:
    verdict = check(ORIGINAL + "\n@triton.jit\ndef " + KERNEL + "(in_ptr0, out_ptr0, xnumel):\n    pass\n")
    assert verdict.details["rule"] == "kernel" and "2 times" in verdict.reason


# -- signatures -------------------------------------------------------------------------------


def test_signature_extraction_from_the_original() -> None:
    sig = kernel_signature(ORIGINAL, KERNEL)
    assert isinstance(sig, KernelSignature)
    assert sig.runtime == ("in_ptr0", "out_ptr0", "xnumel")
    assert sig.constexprs == ("XBLOCK",)
    assert sig.has_heuristics and sig.varargs is None and sig.line == ORIGINAL_DEF_LINE
    assert str(sig) == f"{KERNEL}(in_ptr0, out_ptr0, xnumel, XBLOCK: tl.constexpr)"


def test_signature_extraction_reads_aliases_defaults_and_string_annotations() -> None:
    source = (
        "import triton\nfrom triton import language as lang\n"
        "@triton.jit\n"
        "def k(in_out_ptr0, in_ptr1, xnumel, r0_numel, XBLOCK: 'lang.constexpr', R0_BLOCK: triton.constexpr = 16,"
        " *rest, flag=1, **kw):\n    pass\n"
    )
    sig = kernel_signature(source, "k")
    assert sig.runtime == ("in_out_ptr0", "in_ptr1", "xnumel", "r0_numel")
    assert sig.constexprs == ("XBLOCK", "R0_BLOCK")
    assert [p.has_default for p in sig.params] == [False] * 5 + [True]
    assert not sig.has_heuristics
    assert sig.varargs == "*rest, flag, **kw"


def test_signature_extraction_rejects_a_broken_original() -> None:
    with pytest.raises(ValueError, match="defines no top-level function nope"):
        kernel_signature(ORIGINAL, "nope")
    with pytest.raises(ValueError, match="does not parse"):
        kernel_signature("def (", "k")
    with pytest.raises(ValueError):
        check(ORIGINAL, kernel="nope")


@pytest.mark.parametrize(
    "new_def",
    [
        f"def {KERNEL}(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr, SPLIT : tl.constexpr = 2):",
        f"def {KERNEL}(in_ptr0, out_ptr0, xnumel):",  # constexpr dropped: heuristics drop absent XBLOCK
        f"def {KERNEL}(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr = 1024):",
        f"def {KERNEL}(in_ptr0, out_ptr0, xnumel, XBLOCK : triton.language.constexpr):",
    ],
)
def test_compatible_signatures_pass(new_def: str) -> None:
    assert check(replace(ORIGINAL_DEF, new_def)).passed


@pytest.mark.parametrize(
    "new_def, keyword",
    [
        (f"def {KERNEL}(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr, SPLIT : tl.constexpr):",
         "adds constexpr parameter SPLIT without a default"),
        (f"def {KERNEL}(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr, scale=2.0):",
         "adds parameter scale without tl.constexpr and a default"),
        (f"def {KERNEL}(in_ptr0, in_ptr1, out_ptr0, xnumel, XBLOCK : tl.constexpr):",
         "adds parameter in_ptr1"),
        (f"def {KERNEL}(in_ptr0, out_ptr0, xnumel : tl.constexpr, XBLOCK : tl.constexpr):",
         "declares xnumel tl.constexpr"),
        (f"def {KERNEL}(in_ptr0, out_ptr0, XBLOCK : tl.constexpr, xnumel):",
         "puts constexpr parameter XBLOCK before pointer and numel parameters"),
        (f"def {KERNEL}(in_ptr0, out_ptr0, xnumel, XBLOCK):",
         "adds parameter XBLOCK without tl.constexpr and a default (it was tl.constexpr in the original)"),
        (f"def {KERNEL}(in_ptr0, out_ptr0, xnumel, *args, XBLOCK : tl.constexpr):", "takes *args, XBLOCK"),
        (f"def {KERNEL}(in_ptr, out_ptr0, xnumel, XBLOCK : tl.constexpr):", "drops parameter in_ptr0"),
    ],
)
def test_incompatible_signatures_fail(new_def: str, keyword: str) -> None:
    verdict = check(replace(ORIGINAL_DEF, new_def))
    assert verdict.details["rule"] == "signature", verdict.reason
    assert keyword in verdict.reason, verdict.reason
    assert verdict.reason.startswith(f"line {ORIGINAL_DEF_LINE}:")


def test_signature_of_a_multiline_def_points_at_the_parameter() -> None:
    multiline = f"def {KERNEL}(\n    in_ptr0,\n    out_ptr0,\n    xnumel,\n    XBLOCK : tl.constexpr,\n    EXTRA : tl.constexpr,\n):"
    verdict = check(replace(ORIGINAL_DEF, multiline))
    assert verdict.reason.startswith(f"line {ORIGINAL_DEF_LINE + 5}:"), verdict.reason


# -- Verdict ----------------------------------------------------------------------------------


def test_verdict_round_trips_through_json() -> None:
    verdict = check((CANDIDATES / "cheat_side_stream.py").read_text())
    data = json.loads(json.dumps(verdict.to_dict()))
    assert Verdict.from_dict(data) == verdict
    passed = check(ORIGINAL)
    assert Verdict.from_dict(json.loads(json.dumps(passed.to_dict()))) == passed


def test_verdict_reason_is_one_line_and_gate_is_checked() -> None:
    v = Verdict("correctness", False, "max abs error\n 3.5e-2 \t at index 7")
    assert v.reason == "max abs error 3.5e-2 at index 7" and v.details == {}
    assert str(v) == "correctness: FAIL: max abs error 3.5e-2 at index 7"
    with pytest.raises(ValueError, match="unknown gate"):
        Verdict("vibes", True, "ok")


# -- kernel bodies walk every expression -------------------------------------------------------


@pytest.mark.parametrize(
    "snippet, rule, keyword",
    [
        ("t = (tl).core", "module_access", "tl.core"),
        ("t = [tl][0].core", "value_access", ".core of [tl][0]"),
        ("t = tl.arange(0, XBLOCK).__class__", "introspection", "__class__"),
        ("t = tl.__dict__", "introspection", "__dict__"),
        ("t = tmp0.handle", "value_access", ".handle of tmp0"),
        ("t = tl.arange(0, XBLOCK)[0].handle", "value_access", ".handle"),
        ("t = (tmp0 + 1).type.scalar.name.upper()", "kernel_call", "upper()"),
        ("t = f'{tmp0.handle}'", "value_access", ".handle"),
        ("t = [*tl.core.builtins]", "module_access", "tl.core.builtins"),
        ("t = (x := tl.core)", "module_access", "tl.core"),
        ("t = tl.math.fast_expf(tmp0)", "precision", "tl.math.fast_expf"),
        ("t = tl.extra.cuda.gdc_wait()", "module_access", "tl.extra.cuda.gdc_wait"),
        ("t = tl.extra.cuda.smid()", "device_clock", "smid"),
        ("t = tl.exp2(tmp0)", "precision", "ex2.approx.f32"),
        ("t = tl.sqrt(tmp0)", "precision", "sqrt.approx.f32"),
        ("t = tl_math.exp(tmp0)", "precision", "approx_exp"),
        ("t = sorted([1])", "kernel_call", "calls sorted()"),
        ("t = (tl.load if True else tl.store)(in_ptr0)", "kernel_call", "calls the result of"),
        ("t = tl.full([1], 0, tl.int32)(1)", "kernel_call", "calls the result of"),
        ("t = tl.inline_asm_elementwise('mov.u32 $0, %smid;', '=r', [], dtype=tl.int32, is_pure=True, pack=1)",
         "device_clock", "%smid"),
        ("t = tl.inline_asm_elementwise('mov.b32 $0, $1;', '=r,r', [tmp0], dtype=tl.int32, is_pure=True, pack=1)",
         "precision", "inline_asm_elementwise"),
        ("tl.store(out_ptr0 + (x0 + 8), tmp8, None)", "mask", "unmasked store of out_ptr0 + (x0 + 8)"),
        ("tl.store(out_ptr0 + (x0 + 8), tmp8)", "mask", "unmasked store"),
        ("t = tl.load(in_ptr0 + (x0 + 8), xmask)", "mask", "unmasked load"),  # xmask is tl.full(..., True, ...)
        ("t = tl.load(in_ptr0 + (x0 + 8), mask=None)", "mask", "unmasked load"),
    ],
)
def test_every_expression_is_walked(snippet: str, rule: str, keyword: str) -> None:
    source, line = kernel_line(snippet)
    verdict = check(source)
    assert not verdict.passed
    assert verdict.details["rule"] == rule, verdict.reason
    assert keyword in verdict.reason, verdict.reason
    assert verdict.reason.startswith(f"line {line}"), verdict.reason


@pytest.mark.parametrize(
    "snippet",
    ["t = tmp0.to(tl.float32).dtype", "t = tmp0.shape[0]", "t = tl.sum(tmp0, 0)", "t = min(1, 2) + len([1])",
     "t = tl.where(tmp0 > 0, tmp0, 0.0).to(tl.int32)", "t = libdevice.exp(tmp0) + tl.sqrt_rn(tmp0)",
     "t = tl.load(in_ptr0 + (x0), xindex < xnumel, other=0.0)",
     "tl.store(out_ptr0 + (x0), tmp8, xindex < xnumel)", "tl.store(out_ptr0 + (x0), tmp8)",
     "t = tl.extra.cuda.libdevice.exp(tmp0)"],
)
def test_the_usual_kernel_language_passes(snippet: str) -> None:
    source, _ = kernel_line(snippet)
    assert check(source).passed, check(source).reason


def test_same_unmasked_access_as_the_original_passes_but_not_a_rebound_index() -> None:
    assert check(ORIGINAL).passed  # Inductor's own unmasked store of out_ptr0 + (x0)
    rebound = replace("    x0 = xindex\n", "    x0 = xindex + 1\n")
    verdict = check(rebound)
    assert verdict.details["rule"] == "mask" and "in_ptr0 + x0" in verdict.reason, verdict.reason
    masked_original = replace("tl.load(in_ptr0 + (x0), None)", "tl.load(in_ptr0 + (x0), xindex < xnumel)")
    verdict = check(ORIGINAL, original=masked_original)  # the candidate drops a mask its original had
    assert verdict.details["rule"] == "mask", verdict.reason


def test_import_time_values_are_literals() -> None:
    for old, new, keyword in [
        ("min_elem_per_thread=0", "min_elem_per_thread=len('ab')", "len('ab')"),
        ("'constants': {}", "'constants': {**{}}", "{**{}}"),
        ("'autotune_hints': set()", "'autotune_hints': set([1])", "set([1])"),
        ("XBLOCK : tl.constexpr):", "XBLOCK : tl.constexpr = triton.cdiv(4, 2)):", "default of"),
        ("XBLOCK : tl.constexpr):", "XBLOCK : int):", "annotation int"),
    ]:
        verdict = check(replace(old, new))
        assert verdict.details["rule"] == "import_time" and keyword in verdict.reason, verdict.reason
    assert check(REDUCTION, original=REDUCTION, kernel=REDUCTION_KERNEL).passed  # ReductionHint.INNER


def test_candidate_only_check_needs_no_original() -> None:
    assert check_static_candidate(ORIGINAL, kernel_name=KERNEL).passed
    for name, (rule, _) in CHEATS.items():
        verdict = check_static_candidate((CANDIDATES / name).read_text(), kernel_name=KERNEL)
        relative = rule in ("precision", "mask", "inline_asm", "signature")
        assert verdict.passed == relative or not verdict.passed, name
        if not relative and rule != "kernel":
            assert not verdict.passed and verdict.details["rule"] == rule, (name, verdict.reason)
    assert "no top-level function named nope" in check_static_candidate(ORIGINAL, kernel_name="nope").reason


# -- the same gate before kernelopt.load and kernelopt verify run anything ---------------------


def test_load_refuses_an_artifact_whose_replacement_fails_the_gate(tmp_path: Path) -> None:
    import torch

    from kernelopt.deliver.export import FORMAT_VERSION, load, seal
    from kernelopt.errors import KerneloptError
    from kernelopt.measure.environment import triton_version

    marker = tmp_path / "problem_ran"
    doc = {
        "format": "kernelopt-artifact", "format_version": FORMAT_VERSION, "torch": str(torch.__version__),
        "triton": triton_version(), "options": {}, "verification": {},
        "problem": {"name": "p", "file": "p.py", "source": f"open({str(marker)!r}, 'w')\n",
                    "overrides": {}, "seed": 0},
        "replacements": [{"graph": 0, "name": KERNEL, "sha256": "0" * 64,
                          "source": (CANDIDATES / "cheat_import_time_file_write.py").read_text()}],
    }
    path = tmp_path / "m.kopt.json"
    path.write_text(json.dumps(seal(doc)))  # a well-formed file: the static gate is what must refuse it
    with pytest.raises(KerneloptError) as info:
        load(path)
    message = str(info.value)
    assert "\n" not in message and KERNEL in message and "(io)" in message
    assert not marker.exists()  # refused before the problem was compiled


def test_verify_refuses_a_cheat_before_any_worker_starts(tmp_path: Path) -> None:
    from kernelopt.api.verify import verify

    candidate = tmp_path / "cand.py"
    candidate.write_text((CANDIDATES / "cheat_jit_calls_python_helper.py").read_text())
    report = verify(tmp_path / "missing_problem.py", KERNEL, candidate)
    assert not report.passed and [v.gate for v in report.verdicts] == ["static"]
    assert report.verdicts[0].details["rule"] == "kernel_call"
