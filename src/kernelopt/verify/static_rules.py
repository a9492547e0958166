"""The static gate's rule set, as data.

Tables of what a candidate kernel module may and may not contain, and nothing
else: the walker in :mod:`kernelopt.verify.static_walker` and the checks beside it
apply them. To forbid a new construct, add it to a table here; to explain a rule
better, edit its line in :data:`RULES`.

Long because it is a table: the whole allow-list (every ``tl``, helper and
libdevice name a kernel may use, the precision table), one entry a line, nothing
to split.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

# --------------------------------------------------------------------------------------
# Rules: id -> what the rule forbids and why. Order = priority: when a candidate breaks
# several rules, the reason shows the first one here (the most specific hack).
# --------------------------------------------------------------------------------------

RULES: dict[str, str] = {
    "syntax": "a candidate must be valid Python",
    "size": "a candidate must be a single kernel module of reasonable size",
    "monkey_patch": "a candidate may not rebind attributes of modules or imported names (monkey-patching)",
    "dynamic_code": "a candidate may not run code built at run time or import dynamically",
    "introspection": "a candidate may not inspect frames, globals or interpreter internals",
    "device_clock": "a candidate may not read the GPU's clocks, timers or SM ids",
    "threads": "a candidate may not start threads or processes",
    "timing": "a candidate may not touch streams, events, synchronization or timers",
    "capture": "a candidate may not ask whether a CUDA graph is being recorded (it must run replayed as it runs called)",
    "io": "a candidate may not touch files, the network or the console",
    "fallback": "a candidate may not carry a fallback path",
    "class_def": "a candidate may not define classes (tensor subclasses, lazy outputs)",
    "global_state": "a candidate may not keep state across calls",
    "context_manager": "a candidate may not enter contexts (streams, devices, grad modes)",
    "torch_compute": "a candidate must compute in Triton, not PyTorch",
    "code_shape": "a candidate may not define lambdas, generators or async code",
    "kernel_call": (
        "a kernel body may call only allow-listed tl, triton_helpers, libdevice and tl_math functions, "
        "tensor methods, a few pure builtins and the module's own @triton.jit functions"
    ),
    "value_access": "a kernel body may read only allow-listed attributes (tensor methods, dtype and shape) of values",
    "precision": "which the original kernel does not use; a candidate may not lower the precision",
    "inline_asm": "a candidate may use inline assembly only as the original does, call for call",
    "import": "allowed: triton, triton.language, torch._inductor.runtime helpers, math, and what the original imports",
    "module_access": "a candidate may use only the Triton language, Inductor's kernel helpers and decorators, and math",
    "kernel": "the candidate must define the kernel it replaces, as Inductor's launcher expects",
    "import_time": (
        "what runs at import (decorator arguments, parameter defaults and annotations) must be literals "
        "and the few constructors Inductor emits"
    ),
    "signature": "pointer and numel parameters must keep the original's names and order",
    "top_level": (
        "the top level may hold only imports, @triton.jit functions, literal constants "
        "and triton_helpers.set_driver_to_gpu()"
    ),
    "mask": (
        "every tl.load and tl.store needs a mask, unless the original makes the same unmasked access "
        "(same pointer expression)"
    ),
}
PRIORITY = {rule: i for i, rule in enumerate(RULES)}

MAX_SOURCE_CHARS = 1_000_000

# Statement and expression kinds no kernel module needs: node type -> (rule, description).
_TryStar = getattr(ast, "TryStar", None)  # Python >= 3.11
FORBIDDEN_NODES: dict[type, tuple[str, Callable[[Any], str]]] = {
    ast.Try: ("fallback", lambda n: "try/" + ("except" if n.handlers else "finally")),
    ast.With: ("context_manager", lambda n: f"with {', '.join(ast.unparse(i.context_expr) for i in n.items)}"),
    ast.AsyncWith: ("code_shape", lambda n: "async with"),
    ast.Global: ("global_state", lambda n: f"global {', '.join(n.names)}"),
    ast.Nonlocal: ("global_state", lambda n: f"nonlocal {', '.join(n.names)}"),
    ast.ClassDef: (
        "class_def",
        lambda n: f"defines class {n.name}" + (f"({', '.join(ast.unparse(b) for b in n.bases)})" if n.bases else ""),
    ),
    ast.Lambda: ("code_shape", lambda n: "lambda"),
    ast.AsyncFunctionDef: ("code_shape", lambda n: f"async def {n.name}"),
    ast.Await: ("code_shape", lambda n: "await"),
    ast.Yield: ("code_shape", lambda n: "yield"),
    ast.YieldFrom: ("code_shape", lambda n: "yield from"),
}
if _TryStar is not None:
    FORBIDDEN_NODES[_TryStar] = ("fallback", lambda n: "try/except*")

# Builtins that reach outside the kernel: name -> rule.
FORBIDDEN_BUILTINS: dict[str, str] = {
    "eval": "dynamic_code",
    "exec": "dynamic_code",
    "compile": "dynamic_code",
    "__import__": "dynamic_code",
    "setattr": "monkey_patch",
    "delattr": "monkey_patch",
    "getattr": "introspection",
    "hasattr": "introspection",
    "globals": "introspection",
    "locals": "introspection",
    "vars": "introspection",
    "dir": "introspection",
    "id": "introspection",
    "breakpoint": "introspection",
    "memoryview": "introspection",
    "open": "io",
    "input": "io",
    "exit": "io",
    "quit": "io",
    "help": "io",
    "print": "io",
    "type": "class_def",
    "super": "class_def",
    "object": "class_def",
    "classmethod": "class_def",
    "staticmethod": "class_def",
    "property": "class_def",
}

# Attribute names that betray a hack whatever object they hang off: name -> rule.
FORBIDDEN_ATTRIBUTES: dict[str, str] = {
    **dict.fromkeys(
        (
            "_getframe",
            "f_back",
            "f_locals",
            "f_globals",
            "f_builtins",
            "f_code",
            "gi_frame",
            "gi_code",
            "cr_frame",
            "tb_frame",
            "tb_next",
            "co_code",
            "_current_frames",
        ),
        "introspection",
    ),
    **dict.fromkeys(
        (
            "Thread",
            "start_new_thread",
            "ThreadPoolExecutor",
            "ProcessPoolExecutor",
            "Process",
            "Pool",
            "Timer",
            "fork",
            "spawn",
        ),
        "threads",
    ),
    **dict.fromkeys(
        (
            "Stream",
            "ExternalStream",
            "Event",
            "stream",
            "current_stream",
            "default_stream",
            "set_stream",
            "get_raw_stream",
            "synchronize",
            "wait_stream",
            "wait_event",
            "record_stream",
            "record_event",
            "elapsed_time",
            "perf_counter",
            "perf_counter_ns",
            "time",
            "time_ns",
            "monotonic",
            "monotonic_ns",
            "process_time",
            "CUDAGraph",
            "graph",
        ),
        "timing",
    ),
    # a launch-bound model is judged as CUDA-graph replays: code that records other work than it runs
    # when called would be timed on the one and checked on the other
    **dict.fromkeys(
        (
            "is_current_stream_capturing",
            "_cuda_isCurrentStreamCapturing",
            "capture_begin",
            "capture_end",
            "graph_pool_handle",
            "make_graphed_callables",
            "cudagraph_trees",
            "cudagraphs",
        ),
        "capture",
    ),
    # console output from the device or the compiler: floods the worker's log and slows the kernel
    **dict.fromkeys(("device_print", "static_print"), "io"),
}
ALLOWED_DUNDER_NAMES = frozenset({"__file__", "__name__"})

# Modules a candidate can never import, with what they would give it (for the reason).
IMPORT_HINTS: dict[str, str] = {
    "os": "file system and process access",
    "sys": "interpreter internals",
    "subprocess": "process spawning",
    "socket": "network access",
    "ssl": "network access",
    "http": "network access",
    "urllib": "network access",
    "requests": "network access",
    "select": "network access",
    "selectors": "network access",
    "threading": "threads",
    "_thread": "threads",
    "multiprocessing": "processes",
    "concurrent": "threads and processes",
    "asyncio": "event loops",
    "ctypes": "native code",
    "cffi": "native code",
    "inspect": "frame introspection",
    "traceback": "frame introspection",
    "gc": "object graph access",
    "weakref": "object graph access",
    "importlib": "dynamic imports",
    "runpy": "dynamic imports",
    "pickle": "deserialization",
    "marshal": "deserialization",
    "shelve": "deserialization",
    "time": "timers",
    "builtins": "builtin patching",
    "io": "file access",
    "pathlib": "file access",
    "shutil": "file access",
    "tempfile": "file access",
    "glob": "file access",
    "mmap": "file access",
    "signal": "signal handlers",
    "atexit": "exit hooks",
    "types": "code objects",
    "operator": "attribute access by name",
    "functools": "function wrapping",
    "numpy": "host computation",
    "torch": "PyTorch",
}

# --------------------------------------------------------------------------------------
# Module attribute policy. A dotted path a candidate uses (after resolving import
# aliases and Inductor's re-exports) is checked against the longest matching key; the
# next component must be in the key's allowed set (ANY: any public name).
# --------------------------------------------------------------------------------------

ANY: frozenset[str] = frozenset({"*"})
HEURISTIC_DECORATORS = frozenset(
    {
        "pointwise",
        "reduction",
        "persistent_reduction",
        "cooperative_reduction",
        "split_scan",
        "template",
        "fixed_config",
        "user_autotune",
        "foreach",
    }
)
TRITON_HELPERS = frozenset(
    {
        "set_driver_to_gpu",
        "promote_to_tensor",
        "div_floor_integer",
        "remainder_integer",
        "pow_integer",
        "is_floating",
        "prod",
        "minimum",
        "maximum",
        "min2",
        "max2",
        "minimum_with_index",
        "maximum_with_index",
        "min_with_index",
        "max_with_index",
        "exp",
        "online_softmax_reduce",
        "online_softmax_combine",
        "online_softmax_combine_with_sum",
        "welford_reduce",
        "welford_combine",
        "welford",
        "device_assert_then",
        "rand4x",
        "randn4x",
        "randint64",
        "any",
        "bucketize_binary_search",
        "pack_value_flag",
        "unpack_value",
        "unpack_flag",
        "exclusive_scan_decoupled_lookback",
        "exclusive_scan_decoupled_lookback_64",
        "frexp",
        "sort_with_index",
        "select_one",
        "x_grid_barrier",
        "constexpr_next_power_of_2",
        "if_mask",
        "inline_asm_pack",
        "inline_asm_unpack",
        "fp8e4m3fn_to_float32",
        "triton_builtin",
        "libdevice",
        "math",
        "tl",
        "triton",
    }
)
TORCH_DTYPES = frozenset(
    {
        "float32",
        "float",
        "float64",
        "double",
        "float16",
        "half",
        "bfloat16",
        "int8",
        "int16",
        "short",
        "int32",
        "int",
        "int64",
        "long",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "bool",
        "complex64",
        "complex128",
        "float8_e4m3fn",
        "float8_e5m2",
        "float8_e4m3fnuz",
        "float8_e5m2fnuz",
    }
)
RUNTIME = "torch._inductor.runtime"
TL_DTYPES = frozenset(
    {
        "int1",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float16",
        "bfloat16",
        "float32",
        "float64",
        "float8e4nv",
        "float8e5",
        "float8e4b15",
        "float8e4b8",
        "float8e5b16",
        "dtype",
        "pointer_type",
        "block_type",
        "void",
    }
)
TL_FUNCTIONS = frozenset(
    {
        "program_id",
        "num_programs",
        "arange",
        "full",
        "zeros",
        "zeros_like",
        "full_like",
        "cast",
        "tensor",
        "load",
        "store",
        "make_block_ptr",
        "advance",
        "where",
        "broadcast",
        "broadcast_to",
        "reshape",
        "view",
        "expand_dims",
        "trans",
        "permute",
        "ravel",
        "join",
        "split",
        "interleave",
        "cat",
        "flip",
        "sum",
        "max",
        "min",
        "argmax",
        "argmin",
        "reduce",
        "xor_sum",
        "associative_scan",
        "cumsum",
        "cumprod",
        "sort",
        "histogram",
        "gather",
        "dot",
        "dot_scaled",
        "atomic_add",
        "atomic_max",
        "atomic_min",
        "atomic_and",
        "atomic_or",
        "atomic_xor",
        "atomic_xchg",
        "atomic_cas",
        "maximum",
        "minimum",
        "clamp",
        "abs",
        "exp",
        "exp2",
        "log",
        "log2",
        "sqrt",
        "sqrt_rn",
        "rsqrt",
        "sigmoid",
        "softmax",
        "sin",
        "cos",
        "erf",
        "floor",
        "ceil",
        "fma",
        "fdiv",
        "div_rn",
        "umulhi",
        "cdiv",
        "isnan",
        "rand",
        "randn",
        "randint",
        "randint4x",
        "rand4x",
        "randn4x",
        "philox",
        "philox_impl",
        "pair_uniform_to_normal",
        "uint_to_uniform_float",
        "constexpr",
        "static_range",
        "range",
        "static_assert",
        "device_assert",
        "debug_barrier",
        "multiple_of",
        "max_contiguous",
        "max_constancy",
        "assume",
        "inline_asm_elementwise",
        "PropagateNan",
        "math",
        "extra",
    }
)
TL_MATH_FUNCTIONS = frozenset(
    {
        "abs",
        "exp",
        "exp2",
        "log",
        "log2",
        "sqrt",
        "sqrt_rn",
        "rsqrt",
        "sin",
        "cos",
        "erf",
        "floor",
        "ceil",
        "fma",
        "fdiv",
        "div_rn",
        "umulhi",
        "cdiv",
        "maximum",
        "minimum",
        "clamp",
        "sigmoid",
        "softmax",
        "isnan",
    }
)
# libdevice's approximate functions: allowed names, but only where the original uses them (precision)
FAST_LIBDEVICE = (
    "fast_dividef",
    "fast_expf",
    "fast_exp10f",
    "fast_logf",
    "fast_log2f",
    "fast_log10f",
    "fast_powf",
    "fast_sinf",
    "fast_cosf",
    "fast_tanf",
    "fast_tanhf",
)
LIBDEVICE_FUNCTIONS = frozenset(
    {
        "abs",
        "acos",
        "acosh",
        "asin",
        "asinh",
        "atan",
        "atan2",
        "atanh",
        "cbrt",
        "ceil",
        "copysign",
        "cos",
        "cosh",
        "cospi",
        "cyl_bessel_i0",
        "cyl_bessel_i1",
        "div_rn",
        "erf",
        "erfc",
        "erfcinv",
        "erfcx",
        "erfinv",
        "exp",
        "exp10",
        "exp2",
        "expm1",
        "fabs",
        "fdim",
        "finitef",
        "floor",
        "fma",
        "fma_rn",
        "fmax",
        "fmin",
        "fmod",
        "frexp",
        "hypot",
        "ilogb",
        "isfinited",
        "isinf",
        "isnan",
        "j0",
        "j1",
        "jn",
        "ldexp",
        "lgamma",
        "llrint",
        "llround",
        "log",
        "log10",
        "log1p",
        "log2",
        "logb",
        "lrint",
        "lround",
        "modf",
        "mul_rn",
        "add_rn",
        "sub_rn",
        "nearbyint",
        "nextafter",
        "normcdf",
        "normcdfinv",
        "pow",
        "rcbrt",
        "rcp_rn",
        "remainder",
        "rhypot",
        "rint",
        "round",
        "rsqrt",
        "rsqrt_rn",
        "scalbn",
        "signbit",
        "sin",
        "sinh",
        "sinpi",
        "sqrt",
        "sqrt_rn",
        "tan",
        "tanh",
        "tgamma",
        "trunc",
        "y0",
        "y1",
        "yn",
        "float_as_int",
        "int_as_float",
        "float_as_uint",
        "uint_as_float",
        "double_as_longlong",
        "longlong_as_double",
        "clz",
        "popc",
        "ffs",
        "brev",
        "byte_perm",
        "mulhi",
        "mul24",
        "sad",
        "saturatef",
        "isinfd",
        "isnand",
        "signbitd",
    }
    | set(FAST_LIBDEVICE)
)
PYTHON_MATH = frozenset(
    {
        "pi",
        "e",
        "tau",
        "inf",
        "nan",
        "log",
        "log2",
        "log10",
        "exp",
        "sqrt",
        "floor",
        "ceil",
        "isinf",
        "isnan",
        "isfinite",
        "prod",
        "gcd",
        "copysign",
        "fabs",
    }
)
POLICIES: dict[str, frozenset[str]] = {
    "triton": frozenset({"jit", "Config", "cdiv", "next_power_of_2", "constexpr", "language"}),
    "triton.language": TL_DTYPES | TL_FUNCTIONS,
    "triton.language.math": TL_MATH_FUNCTIONS,
    "triton.language.extra": frozenset({"libdevice", "cuda"}),
    "triton.language.extra.cuda": frozenset({"libdevice"}),
    "triton.language.extra.libdevice": LIBDEVICE_FUNCTIONS,
    "triton.language.extra.cuda.libdevice": LIBDEVICE_FUNCTIONS,
    "math": PYTHON_MATH,
    RUNTIME: frozenset({"triton_helpers", "triton_heuristics", "hints", "triton_compat"}),
    f"{RUNTIME}.triton_heuristics": HEURISTIC_DECORATORS,
    f"{RUNTIME}.triton_helpers": TRITON_HELPERS,
    f"{RUNTIME}.hints": frozenset({"AutotuneHint", "ReductionHint", "TileHint", "DeviceProperties"}),
    f"{RUNTIME}.triton_compat": frozenset({"libdevice", "math", "tl", "triton", "Config"}),
    "torch": TORCH_DTYPES,  # references only, never calls (see _check_path)
}
# Names Inductor's helper modules re-export: path prefix -> what it is.
REEXPORTS: dict[str, str] = {
    **{f"{RUNTIME}.{m}.triton": "triton" for m in ("triton_helpers", "triton_compat")},
    **{f"{RUNTIME}.{m}.tl": "triton.language" for m in ("triton_helpers", "triton_compat")},
    **{f"{RUNTIME}.{m}.libdevice": "triton.language.extra.libdevice" for m in ("triton_helpers", "triton_compat")},
    **{f"{RUNTIME}.{m}.math": "triton.language.math" for m in ("triton_helpers", "triton_compat")},
    f"{RUNTIME}.triton_compat.Config": "triton.Config",
}
# Paths that are modules: a candidate may use them only through attribute access,
# never as values (an alias would slip past the policy above).
MODULE_PATHS = frozenset(
    {
        "triton",
        "triton.language",
        "triton.language.math",
        "triton.language.extra",
        "triton.language.extra.libdevice",
        "triton.language.extra.cuda",
        "triton.language.extra.cuda.libdevice",
        "math",
        "torch",
        RUNTIME,
        *(f"{RUNTIME}.{m}" for m in POLICIES[RUNTIME]),
    }
)
# Components that must not appear in a path below an allowed root: the modules above,
# Triton's host-side machinery, and the dangerous builtins (``tl.core.getattr``, ...).
DENIED_COMPONENTS = (
    frozenset(IMPORT_HINTS)
    | frozenset(
        {"runtime", "testing", "knobs", "compiler", "backends", "driver", "profiler", "tools", "warnings", "pymath"}
    )
    | frozenset(n for n, rule in FORBIDDEN_BUILTINS.items() if rule in ("dynamic_code", "monkey_patch", "io"))
    | frozenset({"getattr", "globals", "locals", "vars"})
)
# --------------------------------------------------------------------------------------
# Kernel bodies: what a @triton.jit function may call and read besides the module paths
# above. Triton runs any other Python callable it meets at compile time.
# --------------------------------------------------------------------------------------

KERNEL_BUILTINS = frozenset({"range", "float", "int", "bool", "min", "max", "abs", "len"})
TENSOR_METHODS = frozenset(
    {
        "to",
        "reshape",
        "view",
        "broadcast_to",
        "expand_dims",
        "trans",
        "permute",
        "ravel",
        "split",
        "join",
        "sum",
        "max",
        "min",
        "argmax",
        "argmin",
        "reduce",
        "cumsum",
        "cumprod",
        "sort",
        "associative_scan",
        "abs",
        "exp",
        "exp2",
        "log",
        "log2",
        "sqrt",
        "rsqrt",
        "sigmoid",
        "sin",
        "cos",
        "erf",
        "floor",
        "ceil",
        "is_floating",
        "is_int",
        "is_int_signed",
        "is_int_unsigned",
        "is_fp16",
        "is_bf16",
        "is_fp32",
        "is_fp64",
        "is_bool",
        "is_ptr",
        "is_block",
        "to_ir",
        "item",
    }
)
TENSOR_ATTRIBUTES = TENSOR_METHODS | frozenset(
    {
        "dtype",
        "shape",
        "type",
        "T",
        "numel",
        "element_ty",
        "scalar",
        "primitive_bitwidth",
        "fp_mantissa_width",
        "value",
        "int_bitwidth",
        "name",
    }
)
MASK_POSITIONS = {"triton.language.load": 1, "triton.language.store": 2}  # tl.load(ptr, mask), tl.store(ptr, v, mask)
MASKED_PATHS = frozenset(MASK_POSITIONS)
INLINE_ASM_PATHS = frozenset({"triton.language.inline_asm_elementwise"})

# --------------------------------------------------------------------------------------
# Import time: decorator arguments, defaults and annotations are evaluated when the
# module loads. Calls allowed there (besides literals): resolved path -> keyword-only?
# --------------------------------------------------------------------------------------

IMPORT_TIME_CALLS = frozenset({f"{RUNTIME}.hints.DeviceProperties", "builtins.set", "triton.Config"})
IMPORT_TIME_ENUMS = frozenset({f"{RUNTIME}.hints.{h}" for h in ("ReductionHint", "TileHint", "AutotuneHint")})
IMPORT_TIME_NAMES = frozenset({"__file__", "True", "False", "None"})

# --------------------------------------------------------------------------------------
# The device clock: names that read it, and the PTX special registers that hold it.
# --------------------------------------------------------------------------------------

DEVICE_CLOCK_NAMES = frozenset(
    {
        "globaltimer",
        "globaltimer_lo",
        "globaltimer_hi",
        "clock",
        "clock64",
        "smid",
        "nsmid",
        "warpid",
        "nwarpid",
        "gridid",
        "memory_clock",
        "read_clock",
    }
)
DEVICE_CLOCK_REGISTERS = ("%globaltimer", "%clock", "%smid", "%nsmid", "%warpid", "%nwarpid", "%gridid")

# Keywords ``@triton.jit(...)`` may take (``launch_metadata``/``repr`` would run host hooks).
JIT_KEYWORDS = frozenset({"do_not_specialize", "do_not_specialize_on_alignment", "debug", "noinline"})

# --------------------------------------------------------------------------------------
# Precision: tokens naming a lower precision or an approximate mode. A candidate may
# use a token only if the original uses it too.
# --------------------------------------------------------------------------------------

LOW_PRECISION_NAMES: dict[str, str] = {
    "float16": "float16",
    "half": "float16",
    "fp16": "float16",
    "f16": "float16",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
}
LOW_PRECISION_PREFIXES = ("float8", "fp8")
APPROXIMATE_FUNCTIONS = frozenset({"fdiv", "inline_asm_elementwise"})  # plus every fast_* (libdevice)
# Spellings that lower (for fp32 on NVIDIA) to an approximate instruction rather than the
# libdevice routine or an IEEE-rounded one: resolved path -> (token, what it lowers to).
# A candidate may use one only if its original uses the same token.
APPROXIMATE_LOWERINGS: dict[str, tuple[str, str]] = {
    **{f"{m}.exp": ("approx_exp", "ex2.approx.f32 on x*log2(e)") for m in ("triton.language", "triton.language.math")},
    **{f"{m}.exp2": ("approx_exp2", "ex2.approx.f32") for m in ("triton.language", "triton.language.math")},
    **{f"{m}.sqrt": ("approx_sqrt", "sqrt.approx.f32") for m in ("triton.language", "triton.language.math")},
    **{f"{m}.rsqrt": ("approx_rsqrt", "rsqrt.approx.f32") for m in ("triton.language", "triton.language.math")},
    **{f"{m}.fdiv": ("fdiv", "div.full.f32") for m in ("triton.language", "triton.language.math")},
    **{
        f"{m}.{f}": (f, f"the approximate __nv_{f}")
        for m in ("triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice")
        for f in FAST_LIBDEVICE
    },
}
APPROXIMATE_ASM_MARKERS = (".approx", "div.full", ".ftz")
REDUCED_PRECISION_MODES = frozenset({"tf32", "tf32x3", "bf16x3", "bf16x6", "hf32"})
CONSTEXPR_PATHS = frozenset({"triton.language.constexpr", "triton.constexpr"})
