"""Every private Inductor API we use, exercised on this torch: fails loudly when PyTorch moves one.

These run on the CPU (Inductor generates C++ there), so CI's newer torch checks the
same hooks the GPU path relies on: the inner-compile hook, Dynamo's input names,
the wrapper text, the live output module and Inductor's own source loader.
"""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest
import torch

from kernelopt.capture import LaunchSink, capture, compat
from kernelopt.errors import UnsupportedEnvironment


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 16)
        self.ln = torch.nn.LayerNorm(16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(torch.nn.functional.gelu(self.fc(x))) * 2


@pytest.fixture(scope="module")
def artifact():
    torch.manual_seed(0)
    model = Tiny().eval()
    x = torch.randn(4, 8)
    return capture(model, [x]), model, x


def test_torch_version_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    compat.require_supported_torch()
    monkeypatch.setattr(torch, "__version__", "2.4.1+cu121")
    with pytest.raises(UnsupportedEnvironment, match="too old.*pip install -U torch"):
        compat.require_supported_torch()


def test_inner_compile_hook_sees_graph_and_names(artifact) -> None:
    art, _, _ = artifact
    (graph,) = art.graphs
    assert graph.cache_key
    assert "def call(" in graph.source_code
    assert graph.placeholders == [
        "L['self']._modules['fc']._parameters['weight']",
        "L['self']._modules['fc']._parameters['bias']",
        "L['x']",
        "L['self']._modules['ln']._parameters['weight']",
        "L['self']._modules['ln']._parameters['bias']",
    ]


def test_output_module_is_live(artifact) -> None:
    art, _, _ = artifact
    (graph,) = art.graphs
    assert sys.modules[graph.module.__name__] is graph.module
    assert graph.module.__name__.endswith(graph.cache_key)
    for var in graph.kernels:
        assert callable(vars(graph.module)[var])
    assert "extern_kernels" in vars(graph.module) and "aten" in vars(graph.module)


def test_launches_recorded_in_order_and_proxies_removed(artifact) -> None:
    art, model, x = artifact
    kinds = [(ln.kind, ln.name) for ln in art.launches]
    assert kinds[0] == ("vendor", "extern_kernels.addmm")
    assert [k for k, _ in kinds[1:]] == ["cpp"] * (len(kinds) - 1)
    static = [(s.kind, s.name) for s in art.graphs[0].output_code.launch_sites]
    assert kinds == static
    before = dict(vars(art.graphs[0].module))
    sink = LaunchSink(record_args=True)
    with art.instrumented(sink):
        sink.begin_call()
        out = art(x)
    assert len(sink.launches) == len(kinds)
    after = vars(art.graphs[0].module)
    assert all(after[k] is v for k, v in before.items())  # every proxy removed
    torch.testing.assert_close(out, model(x))


def test_instrumented_restores_globals_on_error(artifact) -> None:
    art, _, _ = artifact
    g = vars(art.graphs[0].module)
    original = g["extern_kernels"]
    with pytest.raises(RuntimeError), art.instrumented(LaunchSink()):
        assert g["extern_kernels"] is not original
        raise RuntimeError("boom")
    assert g["extern_kernels"] is original


def test_source_loader_and_config_reader() -> None:
    module = compat.load_source_module("def answer():\n    return 42\n")
    assert module.answer() == 42
    assert compat.chosen_config(object()) is None
    tuner = compat.caching_autotuner_class()  # importable with or without Triton installed
    assert tuner is not None and tuner.__name__ == "CachingAutotuner" and hasattr(tuner, "run")


def test_recompile_counter_moves_on_new_shapes() -> None:
    fn = torch.compile(lambda x: x * 2 + 1, backend="eager", dynamic=False)
    fn(torch.randn(3))
    before = compat.recompile_count()
    fn(torch.randn(3))
    assert compat.recompile_count() == before
    fn(torch.randn(4, 2))
    assert compat.recompile_count() == before + 1


def test_a_compile_taken_from_inductor_s_on_disk_cache_is_counted(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stock modes' processes share an Inductor cache (pipeline.evaluator.stock_cache_env) and record
    whether their compile came from it: the count must move on a hit and stay on a miss."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))

    def compiled() -> None:
        compat.reset_dynamo()
        torch.compile(lambda x: (x * 3).sin() + 1, dynamic=False)(torch.randn(8))

    before = compat.compile_cache_hits()
    compiled()
    assert compat.compile_cache_hits() == before  # a fresh cache folder: compiled, not found
    compiled()
    assert compat.compile_cache_hits() > before  # the same graph again, after Dynamo forgot it: from disk


def test_fresh_compile_disables_caches() -> None:
    import torch._inductor.config as cfg

    with compat.fresh_compile():
        assert cfg.force_disable_caches is True


def test_output_module_missing_is_a_clear_error() -> None:
    class Fake:
        cache_key = "no-such-module-key"

    with pytest.raises(UnsupportedEnvironment, match="cannot find Inductor's output module"):
        compat.output_module(Fake())


def test_call_function_is_the_graphs_call_and_its_code_can_be_swapped() -> None:
    """Graph candidates replace the code object of the function behind an output module's ``call``;
    this torch's wrapper must still be a plain function (or a method bound to one) that every
    caller reaches."""
    import types

    from kernelopt.capture import capture

    artifact = capture(torch.nn.Tanh(), [torch.randn(4, 8)])
    function = compat.call_function(artifact.graphs[0].module)
    assert isinstance(function, types.FunctionType) and "args" in function.__code__.co_varnames
    original = function.__code__
    params = ", ".join(original.co_varnames[: original.co_argcount])
    module_code = compile(f"def call({params}):\n    raise LookupError('swapped')\n", "<test>", "exec")
    function.__code__ = next(c for c in module_code.co_consts if isinstance(c, types.CodeType))
    try:
        with pytest.raises(LookupError, match="swapped"):
            artifact(torch.randn(4, 8))
    finally:
        function.__code__ = original
    artifact(torch.randn(4, 8))  # the original again
    with pytest.raises(UnsupportedEnvironment, match="no call function"):
        compat.call_function(types.ModuleType("empty"))


def test_heuristic_decorators_and_launcher_contract_exist() -> None:
    """Pinned candidates are built with fixed_config; kernels launch with .run(*args, stream=...)."""
    import inspect

    module = compat.heuristics_module()
    for name in compat.HEURISTIC_DECORATORS:
        assert callable(getattr(module, name, None)), f"triton_heuristics.{name} moved"
    fixed = inspect.signature(module.fixed_config).parameters
    assert {"config", "filename", "triton_meta", "inductor_meta"} <= set(fixed), fixed
    run = inspect.signature(compat.caching_autotuner_class().run).parameters
    assert "stream" in run, run
    # The compile pool warms Triton's cache through precompile(warm_cache_only=True).
    precompile = inspect.signature(compat.caching_autotuner_class().precompile).parameters
    assert "warm_cache_only" in precompile, precompile


def test_warm_compile_asks_for_a_cache_only_compile() -> None:
    calls = []

    class Kernel:
        def precompile(self, warm_cache_only: bool = False) -> None:
            calls.append(warm_cache_only)

    compat.warm_compile(Kernel())
    assert calls == [True]


def test_coordinate_descent_hooks_exist() -> None:
    """compat.coordinate_descent_config switches on Inductor's own tuner through inductor_meta."""
    import inspect

    tuner = compat.caching_autotuner_class()
    assert "_should_coordesc_tune" in vars(tuner), "CachingAutotuner._should_coordesc_tune moved"
    assert 'inductor_meta.get("coordinate_descent_tuning"' in inspect.getsource(tuner.run), (
        "run() no longer reads the flag"
    )

    class NotTunable:
        _should_coordesc_tune = False
        inductor_meta: dict = {}

    assert compat.coordinate_descent_config(NotTunable(), []) is None
    assert NotTunable.inductor_meta == {}  # left as it was

    class Kind:
        name = "FIXED"

    class OlderTorchFixed:  # no _should_coordesc_tune: the kind decides
        heuristic_type = Kind()
        inductor_meta: dict = {}

    assert compat.coordinate_descent_config(OlderTorchFixed(), []) is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="torch's file-based CPU sharing lives in /dev/shm")
def test_a_shared_cpu_storage_names_the_files_a_borrower_opens() -> None:
    """A worker of another user is lent these: if torch moves them, lending fails here, not in a worker."""
    import os
    import stat

    storage = torch.arange(8, dtype=torch.float32).untyped_storage()
    kind, handle = compat.share_storage(storage)
    files, sockets = compat.shared_storage_paths(kind, handle)
    assert kind == "cpu" and len(files) == 1 and len(sockets) == 1
    assert stat.S_ISREG(os.stat(files[0]).st_mode) and os.stat(files[0]).st_size >= storage.nbytes()
    assert stat.S_ISSOCK(os.stat(sockets[0]).st_mode)
    with pytest.raises(ValueError, match="unknown shared storage kind"):
        compat.shared_storage_paths("xpu", ())


def test_mode_options_come_from_torch_s_own_table() -> None:
    """A search based on a stock mode captures with exactly what that mode sets; the table moving or
    changing shape fails here, not as a silently different baseline."""
    assert compat.mode_options("default") == {}
    tuned = compat.mode_options("max-autotune-no-cudagraphs")
    assert tuned.get("max_autotune") is True and not tuned.get("triton.cudagraphs")
    assert compat.mode_options("reduce-overhead").get("triton.cudagraphs") is True
    import torch._inductor.config as inductor_config

    for name in tuned:  # every option is one Inductor's config knows
        assert hasattr(inductor_config, name.split(".")[0]), name


def test_a_graph_without_generated_code_is_recognised() -> None:
    """The tail of a training step (after its gradient call breaks Dynamo's graph) compiles to a plain
    function: the capture skips it instead of reading a source it does not have."""

    class Compiled:
        source_code = "def call(args): ..."
        cache_key = "abc"

    assert compat.has_output_code(Compiled())
    assert not compat.has_output_code(lambda *args: args)


def test_a_cpu_graph_can_be_compiled_as_one_cuda_graph_partition() -> None:
    """The CPU tests of graph candidates under CUDA graphs rest on this: Inductor's partitioned
    wrapper (a Runner whose call forwards to module-level partition functions) for CPU ops."""
    from kernelopt.capture import capture
    from kernelopt.capture.call_sequence import is_partitioned, single_partition

    with compat.cpu_graph_partitions():
        artifact = capture(torch.nn.Tanh(), [torch.randn(4, 8)])
    source = artifact.graphs[0].source_code
    assert is_partitioned(source), source
    partition = single_partition(source)
    assert partition is not None and partition.function == "partition_0"
    function = compat.partition_function(artifact.graphs[0].module, partition.function)
    assert function.__code__.co_argcount == 1
    with pytest.raises(UnsupportedEnvironment, match="no partition function"):
        compat.partition_function(artifact.graphs[0].module, "partition_9")
    plain = capture(torch.nn.Tanh(), [torch.randn(4, 8)])
    assert not is_partitioned(plain.graphs[0].source_code)  # the rule is put back


def test_row_split_compile_patches_inductors_split_and_launch_and_puts_them_back(monkeypatch) -> None:
    """compat.row_split_compile leans on InductorChoices' two hooks, V.set_choices_handler, the
    cooperative_reduction heuristic (its split from the device's SM count, its cooperative launch) and
    x_grid_barrier's protocol, which kernelopt.capture.row_split inlines with another leader."""
    import inspect

    from torch._inductor.choices import InductorChoices
    from torch._inductor.runtime import triton_helpers, triton_heuristics
    from torch._inductor.runtime.hints import DeviceProperties, ReductionHint
    from torch._inductor.virtualized import V

    for hook in ("should_use_cooperative_reduction", "should_use_persistent_reduction"):
        assert callable(getattr(InductorChoices, hook, None)), f"InductorChoices.{hook} moved"
    params = list(inspect.signature(triton_heuristics.cooperative_reduction).parameters)
    assert params == ["size_hints", "reduction_hint", "triton_meta", "filename", "inductor_meta"], params
    assert "multi_processor_count" in inspect.getsource(triton_heuristics.cooperative_reduction)
    barrier = inspect.getsource(inspect.getmodule(triton_helpers))  # the helper is a (interpreted) JIT function
    barrier = barrier[barrier.index("def x_grid_barrier") :][:1500]
    assert "tl.program_id(0) == 0" in barrier and "0x80000000" in barrier and "tl.num_programs(0)" in barrier

    seen = {}

    def cached_autotune(size_hints, configs, triton_meta, **kwargs):
        seen.update(configs=configs, meta=triton_meta)
        return "launcher"

    monkeypatch.setattr(triton_heuristics, "cached_autotune", cached_autotune)
    original = triton_heuristics.cooperative_reduction
    device = DeviceProperties.create(torch.device("cpu"))
    meta = {"device": device, "launch_cooperative_grid": True}
    with compat.row_split_compile(8192, 4096):
        assert type(V.choices).__name__ == "RowSplitChoices"
        sizes = SimpleNamespace(sizevars=SimpleNamespace(statically_known_geq=lambda a, b: a >= b))
        with V.set_graph_handler(sizes):  # cooperative from the caller's width on, not below it
            cooperative = V.choices.should_use_cooperative_reduction
            assert cooperative(SimpleNamespace(reduction_numel=4096)) and not cooperative(SimpleNamespace(reduction_numel=4095))
        assert V.choices.should_use_persistent_reduction(None, True) is True  # cooperative: always persistent
        launcher = triton_heuristics.cooperative_reduction(
            {"x": 2048, "r0_": 131072}, ReductionHint.INNER, meta, "k.py", {"persistent_reduction": True}
        )
    assert launcher == "launcher" and {c.kwargs["RSPLIT"] for c in seen["configs"]} == {16}  # 131072 / 8192
    assert seen["meta"]["launch_cooperative_grid"] is False and meta["launch_cooperative_grid"] is True
    assert triton_heuristics.cooperative_reduction is original and type(V.choices) is InductorChoices


def test_post_grad_pass_runs_before_inductors_patterns_and_is_put_back() -> None:
    """compat.post_grad_pass leans on Inductor's post_grad_custom_pre_pass (a CustomGraphPass with a
    uuid for its cache) running on the post-grad ATen graph before its own pattern passes: the hook
    sees the graph while its scaled softmax is still in the joint-graph pass's form (the online-softmax
    pattern has not yet replaced it), and the option is empty again after the context."""
    import torch._inductor.config as inductor_config
    from torch._inductor.custom_graph_pass import CustomGraphPass

    seen: list[set[str]] = []
    signs: list[int] = []

    def watch(graph: torch.fx.Graph) -> None:
        seen.append({str(n.target) for n in graph.nodes if n.op == "call_function"})
        # the joint-graph pass's sign (x * 1), which Inductor's remove_noop_ops drops after this hook
        signs.append(sum(n.target is torch.ops.aten.mul.Tensor and n.args[1] == 1 for n in graph.nodes))
        assert isinstance(inductor_config.post_grad_custom_pre_pass, CustomGraphPass)
        assert inductor_config.post_grad_custom_pre_pass.uuid().startswith(f"kernelopt:{__name__}.watch:")

    torch._dynamo.reset()
    with compat.fresh_compile(), compat.post_grad_pass(watch):
        torch.compile(lambda x: torch.softmax(x * 0.5, dim=-1))(torch.randn(4, 33))
    torch._dynamo.reset()
    assert seen and "aten.amax.default" in seen[0] and "aten.exp.default" in seen[0]
    assert signs[0] == 1 and not any("prepare_softmax_online" in target for target in seen[0])
    assert inductor_config.post_grad_custom_pre_pass is None
    # the options the fence knows: Inductor's only (kernelopt's own are resolved above it, rewrites/passes)
    assert compat.has_inductor_option("split_reductions") and compat.has_inductor_option("triton.cudagraphs")
    assert not compat.has_inductor_option("kernelopt.online_softmax") and not compat.has_inductor_option("no_such")


def test_an_aten_op_s_name_and_argument_names_are_read_from_the_op() -> None:
    """What :mod:`kernelopt.evaluate.forced_rereads` reads of a traced graph's ops: the overload packet's
    name and the schema's argument names (a vector norm's ``dim`` comes after its ``ord``)."""
    import operator

    assert compat.aten_op_name(torch.ops.aten.sum.dim_IntList) == "sum"
    assert compat.aten_op_name(torch.ops.aten._log_softmax.default) == "_log_softmax"
    assert compat.aten_op_name(operator.getitem) is None
    names = compat.op_argument_names(torch.ops.aten.linalg_vector_norm.default)
    assert names[:4] == ["self", "ord", "dim", "keepdim"]
    assert compat.op_argument_names(torch.ops.aten.var_mean.correction)[:2] == ["self", "dim"]
    assert "keepdim" in compat.op_argument_names(torch.ops.aten.var_mean.correction)
    assert compat.op_argument_names(operator.getitem) == []


def test_raw_stream_reads_the_current_stream_handle_as_inductor_does() -> None:
    if torch.cuda.is_available():
        assert compat.raw_stream(0) == torch.cuda.current_stream(0).cuda_stream
    else:  # a CPU build has no CUDA bindings: the name compat calls must still be Inductor's own
        import inspect

        import torch._dynamo.device_interface as device_interface

        assert "_cuda_getCurrentRawStream" in inspect.getsource(device_interface)


def test_cxx11_abi_is_torchs_build_flag() -> None:
    """The group norm's C++ host path is built with torch's ABI flag: read where torch keeps it (an
    AttributeError here says it moved)."""
    abi = compat.cxx11_abi()
    assert isinstance(abi, bool) and abi == bool(torch._C._GLIBCXX_USE_CXX11_ABI)
    if compat.torch_version() >= (2, 7):  # torch's wheels have used the C++11 ABI since 2.7
        assert abi
