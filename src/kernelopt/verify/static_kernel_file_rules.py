"""Gate 1's rule set for a standalone Triton kernel file, as data.

The rule table of :mod:`kernelopt.verify.static_kernel_file` (:data:`KERNEL_FILE_RULES`, in
priority order) and the tables its checks apply, and nothing else: the modules a file may
import, what ``launch`` may read, call and allocate (tensor fields, queries, views and sizes,
allocations, size calls, builtins), the keywords ``@triton.autotune`` and ``triton.Config`` may
take, and the kinds of value ``launch`` tracks. The checks live in
:mod:`~kernelopt.verify.static_launch` (``launch``) and :mod:`~kernelopt.verify.static_kernel_file`
(the rest of the file). To allow or forbid a construct, edit its table here; to explain a rule
better, edit its line in :data:`KERNEL_FILE_RULES`. The rules shared with the kernel gate take
their text from :data:`~kernelopt.verify.static_rules.RULES`.
"""

from __future__ import annotations

import ast

from kernelopt.verify.static_findings import Finding
from kernelopt.verify.static_rules import RULES, TL_DTYPES

# The walker's rules that hold anywhere in the file, host code included.
ANYWHERE = (
    "monkey_patch",
    "dynamic_code",
    "introspection",
    "device_clock",
    "threads",
    "timing",
    "capture",
    "io",
    "fallback",
    "class_def",
    "global_state",
    "context_manager",
)
KERNEL_FILE_RULES: dict[str, str] = {
    "size": "the source is too large to check",
    "syntax": "the candidate must be Python that parses",
    **{rule: RULES[rule] for rule in ANYWHERE},
    "torch_compute": (
        "the work runs in the file's Triton kernels: no PyTorch calls or tensor methods beyond the "
        "allow-listed allocations, views and size queries, and no arithmetic, comparison, truth test "
        "or indexing on tensors"
    ),
    "mutation": "launch may not write into tensors: no in-place methods, subscript or attribute writes, out=",
    "code_shape": "a candidate may not define lambdas (but launch's `lambda meta:` grid), generators or async code",
    "import": "allowed imports: torch, triton, triton.language, math, and the triton modules the original imports",
    "top_level": (
        "the top level may hold only imports, literal constants, @triton.jit functions, launch, "
        "and reference / get_inputs as the original has them"
    ),
    "entry": "exactly one plain `def launch` taking the original's parameters, in order",
    "original_only": "reference and get_inputs are the original's: a candidate may repeat them unchanged or omit them",
    "autotune": (
        "@triton.autotune takes only literal configs (triton.Config of a literal dict, num_warps, num_stages, "
        "num_ctas, maxnreg), a key of strings, reset_to_zero / restore_value of strings; no hooks or pruning"
    ),
    "heuristics": "@triton.heuristics runs its functions on the host: only as the original has it, unchanged",
    "decorator": (
        "a kernel is decorated @triton.jit innermost (with its compile keywords only), under at most "
        "one @triton.autotune and the original's @triton.heuristics"
    ),
    "kernel_launch": (
        "launch starts only the file's own @triton.jit kernels, as a statement K[grid](...), "
        "grid a tuple of sizes or `lambda meta: (...)` reading only meta['NAME']"
    ),
    "launch_call": (
        "launch may call only torch.empty / empty_like / empty_strided / zeros / zeros_like, triton.cdiv, "
        "triton.next_power_of_2, math functions of sizes, min, max, len, int, tuple, range, "
        "and the allow-listed tensor methods"
    ),
    "name": (
        "launch may name only its parameters and locals, the imported modules, the file's kernels, "
        "the allowed builtins and literal constants"
    ),
    "expression": (
        "launch builds values only from parameters, locals, literals and constants, with arithmetic and "
        "comparisons on sizes and reads of a tensor's shape, dtype, device, ndim and is_cuda"
    ),
    "statement": (
        "launch may hold only assignments to locals, kernel launches, assert, if/else, for over range(...), and return"
    ),
    "return": "launch returns its locals: a name or a tuple of names",
    **{
        rule: RULES[rule]
        for rule in ("kernel_call", "value_access", "module_access", "import_time", "inline_asm", "mask")
    },
    "precision": "a candidate may not use a lower precision or an approximate mode that the original file does not",
}
PRIORITY = {rule: i for i, rule in enumerate(KERNEL_FILE_RULES)}

ALLOWED_MODULES = frozenset({"torch", "triton", "triton.language", "math"})
TRUSTED_FUNCTIONS = ("reference", "get_inputs")  # the judge takes them from the original
ENTRY = "launch"

# launch: tensor attributes and methods (name -> what they give), calls, builtins.
NUMBER, SHAPE, TENSOR, OTHER, GRID, META = "number", "shape", "tensor", "other", "grid", "meta"
Kind = str | None  # one of the above; None: not known yet (only while kinds are being inferred)
KIND_WORDS = {
    NUMBER: "a number",
    SHAPE: "a shape",
    TENSOR: "a tensor",
    OTHER: "a dtype, device, string or None",
    GRID: "a grid",
    META: "the grid's meta",
}
TENSOR_FIELDS = {"shape": SHAPE, "dtype": OTHER, "device": OTHER, "ndim": NUMBER, "is_cuda": NUMBER}
TENSOR_QUERIES = frozenset({"numel", "dim", "element_size", "is_contiguous"})
TENSOR_SIZES = frozenset({"size", "stride"})  # a number with a dim argument, a shape without
TENSOR_VIEWS = frozenset(
    {
        "contiguous",
        "view",
        "reshape",
        "flatten",
        "unsqueeze",
        "squeeze",
        "t",
        "transpose",
        "permute",
        "expand",
        "as_strided",
    }
)
ALLOCATIONS = {  # resolved path -> what its positional arguments are
    "torch.empty": "sizes",
    "torch.zeros": "sizes",
    "torch.empty_like": "like",
    "torch.zeros_like": "like",
    "torch.empty_strided": "strided",
}
ALLOCATION_KEYWORDS = frozenset({"dtype", "device", "memory_format"})
MEMORY_FORMATS = frozenset({"contiguous_format", "preserve_format", "channels_last", "channels_last_3d"})
SIZE_CALLS = {"triton.cdiv": 2, "triton.next_power_of_2": 1}
MATH_CONSTANTS = frozenset({"pi", "e", "tau", "inf", "nan"})
BUILTINS = frozenset({"min", "max", "len", "int", "tuple", "range"})
LAUNCH_DENIED_KEYWORDS = frozenset({"warmup", "grid", "stream"})
VALUE_TL_DTYPES = TL_DTYPES - {"dtype", "pointer_type", "block_type", "void"}

CONSTANT_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.LShift)
AUTOTUNE_STRINGS = frozenset({"key", "reset_to_zero", "restore_value"})
AUTOTUNE_INTS = frozenset({"warmup", "rep"})
CONFIG_KEYWORDS = frozenset({"num_warps", "num_stages", "num_ctas", "maxnreg"})

EXPRESSION_KINDS: dict[type, str] = {
    ast.JoinedStr: "an f-string",
    ast.Dict: "a dict",
    ast.Set: "a set",
    ast.ListComp: "a comprehension",
    ast.SetComp: "a comprehension",
    ast.DictComp: "a comprehension",
    ast.GeneratorExp: "a generator expression",
    ast.NamedExpr: "an assignment expression",
    ast.Slice: "a slice",
    ast.Starred: "an unpacking",
}
STATEMENT_KINDS: dict[type, str] = {
    ast.While: "a while loop",
    ast.Try: "a try block",
    ast.With: "a with block",
    ast.FunctionDef: "a nested function",
    ast.AsyncFunctionDef: "a nested function",
    ast.ClassDef: "a class definition",
    ast.Import: "an import",
    ast.ImportFrom: "an import",
    ast.Global: "a global declaration",
    ast.Nonlocal: "a nonlocal declaration",
    ast.Delete: "a del statement",
    ast.Raise: "a raise statement",
    ast.AnnAssign: "an annotated assignment",
    ast.AsyncFor: "an async loop",
    ast.AsyncWith: "an async with block",
}


def finding(rule: str, node: ast.AST | None, construct: str) -> Finding:
    """A finding of ``rule`` at ``node``'s line (the first line without one), with the rule's text."""
    return Finding(rule, getattr(node, "lineno", 1), construct, KERNEL_FILE_RULES[rule])
