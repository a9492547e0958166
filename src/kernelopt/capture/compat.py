"""Every private Inductor / Dynamo API kernelopt touches, in one place.

Inductor's internals move between PyTorch releases. Nothing outside this module
imports from ``torch._inductor`` or ``torch._dynamo``; ``tests/test_compat.py``
exercises each function here so a PyTorch upgrade that moves one fails loudly
in one test instead of quietly somewhere else.
"""

from __future__ import annotations

import contextlib
import sys
import types
from collections.abc import Callable, Iterator, Sequence
from types import ModuleType
from typing import Any

import torch

from kernelopt.capture.compile_stop import check_rewritten, probe_graph, probing_now, rewritten_nothing, stop_probe
from kernelopt.errors import UnsupportedEnvironment

MIN_TORCH = (2, 9)


def torch_version() -> tuple[int, int]:
    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def require_supported_torch() -> None:
    """Refuse torch versions whose Inductor output we have not verified."""
    if torch_version() < MIN_TORCH:
        raise UnsupportedEnvironment(
            f"torch {torch.__version__} is too old: kernelopt needs torch >= {MIN_TORCH[0]}.{MIN_TORCH[1]}; "
            "upgrade with pip install -U torch"
        )


def compile_fx_with_inner_hook(
    gm: torch.fx.GraphModule,
    example_inputs: list[Any],
    on_graph: Callable[[Any], None],
    config_patches: dict[str, Any] | None = None,
    rewrites: Sequence[Callable[[torch.fx.Graph], Any]] = (),
) -> Any:
    """Compile ``gm`` with Inductor under its own ``config_patches``, handing each ``CompiledFxGraph`` to
    ``on_graph``; ``rewrites`` (kernelopt's compile options, resolved by
    :func:`~kernelopt.capture.rewrites.passes.compile_with_options`) run as a post-grad pass, with the
    probe of a :func:`~kernelopt.capture.compile_stop.stop_where_unchanged` context and the probes of a
    :func:`~kernelopt.capture.compile_stop.probing` context after them."""
    import torch._inductor.config as inductor_config
    from torch._inductor.compile_fx import compile_fx, compile_fx_inner

    probe = stop_probe()
    rewrites = (*rewrites, probe) if probe is not None else tuple(rewrites)
    # probes only where the pass is free to take: a user's own pass keeps its place (no counts: compiled)
    if probing_now() and (rewrites or inductor_config.post_grad_custom_pre_pass is None):
        rewrites = (*rewrites, probe_graph)

    def inner(*args: Any, **kwargs: Any) -> Any:
        compiled = compile_fx_inner(*args, **kwargs)
        on_graph(compiled)
        return compiled

    with post_grad_pass(*rewrites) if rewrites else contextlib.nullcontext():
        return compile_fx(gm, example_inputs, inner_compile=inner, config_patches=dict(config_patches or {}))


def placeholder_sources(gm: torch.fx.GraphModule) -> list[str]:
    """Dynamo's source names of the graph inputs, e.g. ``L['self']._modules['fc']._parameters['weight']``."""
    names = []
    for node in gm.graph.find_nodes(op="placeholder"):
        grapharg = node.meta.get("grapharg")
        names.append(grapharg.source.name if grapharg is not None and grapharg.source is not None else node.name)
    return names


def has_output_code(compiled: Any) -> bool:
    """Whether Inductor's inner compile produced a module of generated code. A graph with no
    operations (the tail of a training step after its gradient call breaks Dynamo's graph)
    compiles to a plain function instead: there is nothing in it to capture."""
    return isinstance(getattr(compiled, "source_code", None), str) and isinstance(
        getattr(compiled, "cache_key", None), str
    )


def graph_source_code(compiled_graph: Any) -> str:
    return compiled_graph.source_code


def graph_cache_key(compiled_graph: Any) -> str:
    return compiled_graph.cache_key


def output_module(compiled_graph: Any) -> ModuleType:
    """The live Python module Inductor loaded for a compiled graph (holds the kernel globals)."""
    key = graph_cache_key(compiled_graph)
    for name, module in list(sys.modules.items()):
        if name.endswith(key):
            return module
    raise UnsupportedEnvironment(
        f"cannot find Inductor's output module for graph {key} in sys.modules; "
        f"torch {torch.__version__} may have changed how it loads output code (see capture/compat.py)"
    )


@contextlib.contextmanager
def fresh_compile() -> Iterator[None]:
    """Disable Inductor's caches so every compile runs our hook and produces source code. Inductor then
    writes each compile's code to a new temporary folder under its cache folder and keeps it (the
    compiled graph reads it later): here that cache folder is this process's own
    (:func:`~kernelopt.capture.compile_scratch.scratch_dir`), removed when the process ends."""
    import os

    import torch._inductor.config as inductor_config

    from kernelopt.capture.compile_scratch import scratch_dir

    before = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(scratch_dir())
    try:
        with inductor_config.patch({"force_disable_caches": True}):
            yield
    finally:
        if before is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = before


def inductor_cache_dir() -> str:
    """Inductor's cache folder as it would use it now (``TORCHINDUCTOR_CACHE_DIR`` or its default)."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    return cache_dir()


@contextlib.contextmanager
def stopped_compile_dirs() -> Iterator[list[str]]:
    """The temporary cache folders Inductor keeps ("on error, temporary cache dir kept at ...", logged as
    it re-raises) when kernelopt stops a compile in this context on purpose
    (:class:`~kernelopt.capture.compile_stop.NothingRewritten`), collected for the caller to remove and
    their warning held back; a compile that fails otherwise is logged as Inductor logs it."""
    import logging

    logger = logging.getLogger("torch._inductor.utils")
    kept: list[str] = []

    def hold(record: logging.LogRecord) -> bool:
        raised = sys.exc_info()[1]
        ours = raised is not None and rewritten_nothing(raised) is not None
        if ours and record.msg == "on error, temporary cache dir kept at %s" and isinstance(record.args, tuple):
            kept.append(str(record.args[0]))
            return False
        return True

    logger.addFilter(hold)
    try:
        yield kept
    finally:
        logger.removeFilter(hold)


def inductor_config_patch(options: dict[str, Any]) -> contextlib.AbstractContextManager:
    import torch._inductor.config as inductor_config

    return inductor_config.patch(options)


def mode_options(mode: str) -> dict[str, Any]:
    """The Inductor options a ``torch.compile(mode=...)`` sets (``{}`` for the default), so a
    capture with them compiles what that mode compiles (torch's own table, not a copy of it)."""
    if mode == "default":
        return {}
    return dict(torch._inductor.list_mode_options(mode))


# Programs a row is split across at most: Inductor's cooperative split is last_power_of_2(SMs) // xnumel,
# at most 64 (row_split.MAX_RSPLIT is this)
MAX_ROW_SPLIT = 64


@contextlib.contextmanager
def row_split_compile(chunk: int, wide: int) -> Iterator[None]:
    """Inductor writing every reduction of ``wide`` elements or more (``row_split.WIDE``) as a persistent cooperative one
    (:mod:`kernelopt.capture.row_split`), about ``chunk`` elements of a row per program (RSPLIT a power
    of two from 2 to 64), its grid launched as an ordinary one: in this context only, for compiling
    and first running a graph variant in a worker. Until :func:`~kernelopt.capture.row_split.row_split`
    gives its programs tickets, that grid counts on the hardware starting a row's programs together."""
    import dataclasses

    import torch._inductor.config as inductor_config
    from torch._inductor.choices import InductorChoices
    from torch._inductor.runtime import triton_heuristics
    from torch._inductor.virtualized import V

    class RowSplitChoices(InductorChoices):  # the hooks' signatures differ between torch versions
        def should_use_cooperative_reduction(self, *args: Any) -> bool:  # type: ignore[override]
            features = next((a for a in args if hasattr(a, "reduction_numel")), None)
            rnumel = features.reduction_numel if features is not None else args[-1]
            return bool(V.graph.sizevars.statically_known_geq(rnumel, wide))

        def should_use_persistent_reduction(self, *args: Any, **kwargs: Any) -> bool:  # type: ignore[override]
            if any(a is True for a in args) or kwargs.get("cooperative_reduction"):
                return True
            return bool(super().should_use_persistent_reduction(*args, **kwargs))

    original = triton_heuristics.cooperative_reduction

    def cooperative_reduction(
        size_hints: Any, reduction_hint: Any, triton_meta: Any, filename: Any, inductor_meta: Any
    ) -> Any:
        # Inductor's split is last_power_of_2(SMs) // xnumel (at most 64): give it the grid the split asks.
        split = max(2, min(MAX_ROW_SPLIT, int(size_hints["r0_"]) // chunk))
        meta = dict(triton_meta)
        device, count = meta["device"], split * int(size_hints["x"])
        meta["device"] = (
            device._replace(multi_processor_count=count)  # a NamedTuple in some torch versions
            if hasattr(device, "_replace")
            else dataclasses.replace(device, multi_processor_count=count)
        )
        meta["launch_cooperative_grid"] = False
        return original(size_hints, reduction_hint, meta, filename, inductor_meta)

    triton_heuristics.cooperative_reduction = cooperative_reduction
    try:
        # compiled in this process: a compile pool's workers would load the kernels without the patch
        patch = {"triton.cooperative_reductions": True, "compile_threads": 1}
        with V.set_choices_handler(RowSplitChoices()), inductor_config.patch(patch):
            yield
    finally:
        triton_heuristics.cooperative_reduction = original


@contextlib.contextmanager
def post_grad_pass(*rewrites: Callable[[torch.fx.Graph], Any]) -> Iterator[None]:
    """``rewrites`` run in turn on every graph's post-grad ATen graph before Inductor's own pattern
    passes (its ``post_grad_custom_pre_pass``), in this context only; each returns how many changes it
    made (a :func:`~kernelopt.capture.compile_stop.stop_where_unchanged` compile stops where none
    did). Their cache identity is the source of the modules that define them. A training graph's
    backward, which Inductor compiles at the first backward call, compiles without them."""
    import hashlib
    import inspect

    import torch._inductor.config as inductor_config
    from torch._inductor.custom_graph_pass import CustomGraphPass

    names = ",".join(f"{r.__module__}.{r.__name__}" for r in rewrites)
    if inductor_config.post_grad_custom_pre_pass is not None:
        raise UnsupportedEnvironment(
            "Inductor's post_grad_custom_pre_pass is already set, and kernelopt's compile options "
            f"({names}) run their rewrites there: unset your own pass for this compile"
        )
    sources = "".join(inspect.getsource(sys.modules[r.__module__]) for r in rewrites)
    identity = hashlib.sha256(sources.encode()).hexdigest()

    class KerneloptPass(CustomGraphPass):
        def __call__(self, graph: torch.fx.Graph) -> None:
            changed = 0
            for rewrite in rewrites:
                changed += int(rewrite(graph) or 0)
            check_rewritten(graph, changed, names)

        def uuid(self) -> str:
            return f"kernelopt:{names}:{identity}"

    with inductor_config.patch({"post_grad_custom_pre_pass": KerneloptPass()}):
        yield


def compile_modes() -> list[str]:
    """The ``torch.compile`` modes this torch knows (torch's own table)."""
    return list(torch._inductor.list_mode_options())


def has_inductor_option(name: str) -> bool:
    """Whether this torch's Inductor config has the (dotted) option ``name``."""
    import torch._inductor.config as inductor_config

    node: Any = inductor_config
    for part in name.split("."):
        if not hasattr(node, part):
            return False
        node = getattr(node, part)
    return True


def compile_cache_hits() -> int:
    """How many graphs this process's compiles so far took from Inductor's on-disk caches (its FX graph
    cache, or AOTAutograd's cache, which holds the FX graph cache's entries) instead of compiling them."""
    from torch._dynamo.utils import counters

    return int(counters["inductor"].get("fxgraph_cache_hit", 0)) + int(
        counters["aot_autograd"].get("autograd_cache_hit", 0)
    )


def raw_stream(device: int) -> int:
    """The handle of device ``device``'s current CUDA stream, as Inductor's wrapper reads it for its kernels:
    ``torch.cuda.current_stream(device).cuda_stream`` builds a Stream object at every call, a cost on the
    host path of each launch of kernelopt's own op."""
    return int(torch._C._cuda_getCurrentRawStream(device))


def cxx11_abi() -> bool:
    """Whether torch was built with the C++11 ABI of libstdc++ (C++ built against its headers must match)."""
    return bool(torch._C._GLIBCXX_USE_CXX11_ABI)


def reset_dynamo() -> None:
    torch._dynamo.reset()


def recompile_count() -> int:
    """Dynamo's count of frames compiled so far (a recompile bumps it)."""
    from torch._dynamo.utils import counters

    return int(sum(counters["stats"].get(k, 0) for k in ("unique_graphs",)))


def caching_autotuner_class() -> type | None:
    """Inductor's Triton launcher class, or None where Triton is not installed."""
    try:
        from torch._inductor.runtime.triton_heuristics import CachingAutotuner
    except ImportError:
        return None
    return CachingAutotuner


def load_source_module(source: str) -> ModuleType:
    """Load Python source the way Inductor loads its own kernels (``PyCodeCache.load``)."""
    from torch._inductor.codecache import PyCodeCache

    return PyCodeCache.load(source)


def call_function(module: ModuleType) -> types.FunctionType:
    """The function behind an output module's ``call`` (torch >= 2.9 binds it to a ``Runner``;
    earlier ones define it at module level). Every wrapper around the graph (AOTAutograd's,
    Dynamo's) holds this same function object, so replacing its code object swaps the call
    sequence wherever it is called from."""
    call = getattr(module, "call", None)
    function = getattr(call, "__func__", call)
    if not isinstance(function, types.FunctionType):
        raise UnsupportedEnvironment(
            f"Inductor's output module has no call function (found {type(call).__name__}); "
            f"torch {torch.__version__} may have changed its wrapper (see capture/compat.py)"
        )
    return function


def partition_function(module: ModuleType, name: str) -> types.FunctionType:
    """A CUDA-graph partition of an output module (``partition_0``: a module-level function that
    ``Runner.partitions`` holds, wrapped by the CUDA-graph trees once they record it)."""
    function = getattr(module, name, None)
    if not isinstance(function, types.FunctionType):
        raise UnsupportedEnvironment(
            f"Inductor's output module has no partition function {name} (found {type(function).__name__}); "
            f"torch {torch.__version__} may have changed its graph partitions (see capture/compat.py)"
        )
    return function


@contextlib.contextmanager
def cpu_graph_partitions() -> Iterator[None]:
    """Compile as ``mode="reduce-overhead"`` does (graph partitions for CUDA graphs), with CPU ops
    kept inside the partitions: Inductor otherwise leaves them in ``call``. For the CPU tests, which
    have no GPU to write the partitioned wrapper for. Caches are off: the patched rule is not in
    Inductor's cache key."""
    from torch._inductor import config
    from torch._inductor.scheduler import Scheduler

    original = Scheduler.should_partition
    Scheduler.should_partition = lambda self, node: None  # type: ignore[method-assign]
    try:
        with fresh_compile(), config.patch({"graph_partition": True, "triton.cudagraphs": True}):
            yield
    finally:
        Scheduler.should_partition = original  # type: ignore[method-assign]


def build_cpp_kernel(argtypes: Sequence[str], source: str) -> Any:
    """Build a C++ kernel Inductor generated for CPU tensors, as its wrapper does
    (``async_compile.cpp_pybinding``, synchronously)."""
    from torch._inductor.codecache import CppPythonBindingsCodeCache

    return CppPythonBindingsCodeCache.load_pybinding(list(argtypes), source)


def warm_compile(kernel: Any) -> None:
    """Compile an Inductor kernel into Triton's on-disk cache without loading it on a GPU
    (``CachingAutotuner.precompile(warm_cache_only=True)``, what Inductor's compile workers run)."""
    kernel.precompile(warm_cache_only=True)


def coordinate_descent_config(kernel: Any, args: Sequence[Any]) -> dict[str, Any] | None:
    """The launch config Inductor's own coordinate-descent tuner settles on for ``kernel`` at
    ``args`` (what ``coordinate_descent_tuning=True`` does at a kernel's first launch), or
    None where Inductor would not tune this kernel (templates, fixed configs, deterministic
    reductions). ``kernel`` must be a private copy: the tuner replaces its launchers."""
    should = getattr(kernel, "_should_coordesc_tune", None)
    if should is None:  # a torch without the property: Inductor's rule by the kernel's kind
        kind = getattr(getattr(kernel, "heuristic_type", None), "name", "")
        should = kind not in ("TEMPLATE", "USER_AUTOTUNE", "FIXED")
    if not should:
        return None
    kernel.inductor_meta["coordinate_descent_tuning"] = True  # read by CachingAutotuner.run
    launch(kernel, args)
    torch.cuda.synchronize()
    return chosen_config(kernel)


def chosen_config(kernel: Any) -> dict[str, Any] | None:
    """The launch config a CachingAutotuner settled on (block sizes, warps, stages)."""
    launchers = getattr(kernel, "launchers", None) or []
    if not launchers:
        return None
    config = launchers[0].config
    return {**dict(config.kwargs), "num_warps": config.num_warps, "num_stages": config.num_stages}


HEURISTIC_DECORATORS = ("pointwise", "reduction", "persistent_reduction", "template", "fixed_config", "user_autotune")


def heuristics_module() -> ModuleType:
    """``torch._inductor.runtime.triton_heuristics``: the decorators generated kernels (and pinned
    candidates, ``fixed_config``) are built with."""
    from torch._inductor.runtime import triton_heuristics

    return triton_heuristics


def launch(kernel: Any, args: Sequence[Any]) -> None:
    """Launch an Inductor kernel alone on the current CUDA stream, exactly as the wrapper does
    (``kernel.run(*args, stream=<raw stream>)``; the grid comes from the kernel's own metadata)."""
    kernel.run(*args, stream=torch.cuda.current_stream().cuda_stream)


def share_storage(storage: torch.UntypedStorage) -> tuple[str, tuple[Any, ...]]:
    """A handle another process can open to reach ``storage``'s memory: ("cuda", ...) through CUDA IPC,
    ("cpu", ...) through a shared-memory file (the storage moves into one in place).

    The judge shares its own buffers with the candidate's process this way, so the
    candidate writes where the judge reads and never sees the judge's references."""
    if storage.device.type == "cuda":
        return "cuda", tuple(storage._share_cuda_())
    if storage.device.type == "cpu":
        return "cpu", tuple(storage._share_filename_cpu_())
    raise UnsupportedEnvironment(f"cannot share a {storage.device.type} tensor between processes; use CUDA or the CPU")


SHARED_MEMORY_DIR = "/dev/shm"  # where shm_open(3) puts the names torch's handles carry (Linux)


def shared_storage_paths(kind: str, handle: Sequence[Any]) -> tuple[list[str], list[str]]:
    """The files and sockets a process must open to use a :func:`share_storage` handle: a CPU
    storage's shared-memory file and torch's manager socket; a CUDA storage's reference-counter
    file (the memory itself travels by CUDA IPC, opened through the driver). Each is the lender's,
    mode 600: a worker of another user needs them handed over."""

    def shm(name: Any) -> str:
        text = name.decode() if isinstance(name, bytes) else str(name)
        return SHARED_MEMORY_DIR + text

    if kind == "cpu":
        manager, name, _size = handle
        return [shm(name)], [manager.decode() if isinstance(manager, bytes) else str(manager)]
    if kind == "cuda":
        return [shm(handle[4])], []
    raise ValueError(f"unknown shared storage kind {kind!r}")


def open_shared_storage(kind: str, handle: Sequence[Any]) -> torch.UntypedStorage:
    """The storage a :func:`share_storage` handle names, opened in this process."""
    if kind == "cuda":
        return torch.UntypedStorage._new_shared_cuda(*handle)
    if kind == "cpu":
        return torch.UntypedStorage._new_shared_filename_cpu(*handle)
    raise ValueError(f"unknown shared storage kind {kind!r}")


def aten_op_name(target: Any) -> str | None:
    """The name of an ATen op overload's packet (``aten.sum.dim_IntList`` -> ``sum``), or None for a target
    that is no op overload (a Python function such as ``operator.getitem``)."""
    packet = getattr(target, "_overloadpacket", None)
    return getattr(packet, "__name__", None) if packet is not None else None


def op_argument_names(target: Any) -> list[str]:
    """An ATen op overload's argument names in its schema's order (positional first, then keyword-only):
    how a graph node's ``args`` and ``kwargs`` are read by name; [] for a target with no schema."""
    schema = getattr(target, "_schema", None)
    return [argument.name for argument in getattr(schema, "arguments", ())]
