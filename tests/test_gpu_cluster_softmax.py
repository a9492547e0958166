"""GPU test of kernelopt's row softmax (``kernelopt.capture.rewrites.row_softmax_op``) and the compile option that
hands a graph's wide softmax to it (``kernelopt.capture.rewrites.cluster_softmax``): the CUDA kernel against
float64 on every dtype pair and row width it takes, rows holding infinities and NaN as torch writes
them, and log-softmax over a 50257-wide vocabulary with a temperature regenerated under the option,
through the gates; the same kernel built as a row's L2 normalisation (``kernelopt.row_l2_normalize``,
``kernelopt.capture.rewrites.cluster_norm``), and row-L2 over 65535 regenerated under its option. Speed is
printed, not asserted (``benchmarks/`` holds speed)."""

from __future__ import annotations

import warnings
from dataclasses import asdict, replace

import pytest
import torch
from conftest import EXAMPLES

from kernelopt.capture import compat
from kernelopt.capture.rewrites import row_softmax_kernel, row_softmax_op
from kernelopt.capture.rewrites.cluster_norm import CLUSTER_NORM_BULK_OPTION, CLUSTER_NORM_OPTION
from kernelopt.capture.rewrites.cluster_softmax import CLUSTER_SOFTMAX_BULK_OPTION, CLUSTER_SOFTMAX_OPTION

pytestmark = pytest.mark.gpu



@pytest.fixture(autouse=True)
def root_workers(monkeypatch) -> None:
    monkeypatch.setenv("KERNELOPT_WORKER_USER", "root")  # CUDA IPC between users is refused


PAIRS = [(torch.float32, torch.float32), (torch.bfloat16, torch.float32), (torch.bfloat16, torch.bfloat16),
         (torch.float16, torch.float16)]  # fmt: skip


@pytest.fixture(scope="module")
def built() -> None:
    """Every dtype pair the tests use built at once (nvcc alone, in subprocesses: seconds each, overlapped)."""
    from concurrent.futures import ThreadPoolExecutor

    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0):
        return
    with ThreadPoolExecutor(len(PAIRS)) as pool:
        arch = torch.cuda.get_device_capability()
        list(pool.map(lambda pair: row_softmax_kernel.launcher(*pair, arch), PAIRS))


@pytest.mark.parametrize(
    ("shape", "dtype", "out_float", "offset"),
    [
        ((2048, 50257), torch.float32, False, 0),  # rows not 16-byte aligned: one float a load
        ((4, 512, 16384), torch.float32, False, 0),  # one block a row, three dimensions
        ((256, 131072), torch.float32, False, 0),  # the widest: a cluster of eight
        ((512, 32000), torch.bfloat16, True, 0),  # bf16 in, float32 out
        ((512, 32000), torch.bfloat16, False, 0),
        ((512, 4096), torch.float16, False, 0),
        ((4, 20000), torch.float32, False, 0),  # four rows: fewer clusters than the GPU holds
        ((64, 16384), torch.float32, False, 1),  # a storage offset: rows off 16 bytes, one float a load
        ((64, 32001), torch.bfloat16, False, 1),  # 16-bit, odd width, off 16 bytes
        ((1024, 128256), torch.bfloat16, True, 0),  # token log-probs: four parts in either form
    ],
)
@pytest.mark.parametrize("bulk", [False, True], ids=["registers", "shared"])
def test_the_kernel_computes_the_softmax_of_every_row(built, shape, dtype, out_float, offset, bulk) -> None:
    """Both forms of the op (each block's part of the row in registers, or in shared memory by one bulk
    copy, its head and tail by plain loads where the part is not 16-byte aligned) against float64."""
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("thread-block clusters need sm_90")
    torch.manual_seed(0)
    numel = torch.Size(shape).numel()
    x = (torch.randn(numel + offset, device="cuda") * 4).to(dtype)[offset:].view(shape)
    assert (x.data_ptr() % 16 != 0) == bool(offset)
    x[0, ..., 3] = float("-inf")
    x[1, ...] = float("-inf")
    x[2, ..., 5] = float("inf")
    x[3, ..., 7] = float("nan")
    assert row_softmax_op.supports(x, out_float, bulk)
    row_softmax_op._warn_fallback.cache_clear()
    for log, lse, scale in ((True, False, 1 / 0.7), (False, False, 1.0), (True, True, 1 / 0.7)):
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message="kernelopt.row_softmax computed by torch")  # the kernel ran
            got = torch.ops.kernelopt.row_softmax(x, scale, log, out_float, lse, bulk)
        y = x.double() * scale  # float64: what the kernel's float32 is held to
        if lse:  # logits less their logsumexp: a row's infinite max is its logsumexp
            want = y - torch.logsumexp(y, dim=-1, keepdim=True)
        else:
            want = torch.log_softmax(y, dim=-1) if log else torch.softmax(y, dim=-1)
        assert got.dtype == (torch.float32 if out_float else dtype)
        tolerance = 1e-5 if got.dtype == torch.float32 else 1e-2
        torch.testing.assert_close(got.double(), want, rtol=tolerance, atol=tolerance, equal_nan=True)
        assert torch.isnan(got[1]).all() and torch.isnan(got[3]).all()
        assert torch.isnan(got[2]).all() != lse  # +inf in the row: -inf where finite under lse


@pytest.mark.parametrize(
    ("shape", "dtype", "out_float"),
    [
        ((64, 256000), torch.bfloat16, True),  # a 256000 vocabulary's log-probs from bf16: eight parts of 62.5 KB
        ((16, 458688), torch.bfloat16, False),  # the widest 16-bit row: eight parts of 112 KB
        ((16, 229344), torch.float32, False),  # the widest float32 row
    ],
)
def test_the_shared_memory_form_computes_rows_wider_than_the_registers_hold(built, shape, dtype, out_float) -> None:
    """Rows only the shared-memory form holds (row_softmax_op.max_columns), against float64."""
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("thread-block clusters need sm_90")
    torch.manual_seed(0)
    x = (torch.randn(shape, device="cuda") * 4).to(dtype)
    x[0, 3] = float("-inf")
    x[1, 5] = float("nan")
    assert row_softmax_op.supports(x, out_float, bulk=True) and not row_softmax_op.supports(x, out_float, bulk=False)
    row_softmax_op._warn_fallback.cache_clear()
    for log, lse, scale in ((True, False, 1 / 0.7), (False, False, 1.0), (True, True, 1.0)):
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message="kernelopt.row_softmax computed by torch")  # the kernel ran
            got = torch.ops.kernelopt.row_softmax(x, scale, log, out_float, lse, True)
        y = x.double() * scale
        if lse:
            want = y - torch.logsumexp(y, dim=-1, keepdim=True)
        else:
            want = torch.log_softmax(y, dim=-1) if log else torch.softmax(y, dim=-1)
        tolerance = 1e-5 if got.dtype == torch.float32 else 1e-2
        torch.testing.assert_close(got.double(), want, rtol=tolerance, atol=tolerance, equal_nan=True)
        assert torch.isnan(got[1]).all()


@pytest.mark.parametrize(
    ("shape", "dtype", "offset"),
    [
        ((256, 65535), torch.float32, 0),  # the suite's row-L2 width: rows not 16-byte aligned
        ((64, 16384), torch.float32, 0),
        ((4, 512, 8192), torch.float32, 0),  # three dimensions, one block a row
        ((64, 131072), torch.float32, 0),  # the widest
        ((64, 32001), torch.bfloat16, 1),  # 16-bit, odd width, off 16 bytes
    ],
)
@pytest.mark.parametrize("bulk", [False, True], ids=["registers", "shared"])
def test_the_kernel_computes_the_l2_normalisation_of_every_row(built, shape, dtype, offset, bulk) -> None:
    """The same kernel built as ``kernelopt.row_l2_normalize`` (the blocks exchange sums of squares), in both
    forms, against float64: a zero row is NaN without eps and zero with it, NaN and inf as torch writes them."""
    import torch.nn.functional as F

    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("thread-block clusters need sm_90")
    torch.manual_seed(0)
    numel = torch.Size(shape).numel()
    x = (torch.randn(numel + offset, device="cuda") * 4).to(dtype)[offset:].view(shape)
    x[0, ...] = 0.0
    x[1, ..., 5] = float("inf")
    x[2, ..., 7] = float("nan")
    assert row_softmax_op.supports(x, False, bulk)
    row_softmax_op._warn_fallback.cache_clear()
    for eps in (0.0, 1e-12):
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message="kernelopt.row_l2_normalize computed by torch")  # the kernel ran
            got = torch.ops.kernelopt.row_l2_normalize(x, eps, bulk)
        y = x.double()
        want = y / torch.linalg.vector_norm(y, dim=-1, keepdim=True).clamp_min(eps)
        assert got.dtype == dtype
        tolerance = 1e-5 if dtype == torch.float32 else 1e-2
        torch.testing.assert_close(got.double(), want, rtol=tolerance, atol=tolerance, equal_nan=True)
        assert torch.isnan(got[0]).all() if eps == 0 else (got[0] == 0).all()
        assert torch.isnan(got[2]).all()
        torch.testing.assert_close(got[3:].float(), F.normalize(x[3:].float(), dim=-1).to(dtype).float())


def _regenerated_through_the_gates(problem: str, overrides: dict, option: str) -> None:
    """``problem`` compiled as max-autotune-no-cudagraphs compiles it (its best stock mode), regenerated
    under ``option``: the graph's looped kernel gives way to the op (no second pass over the rows), and the
    candidate goes through the gates (a screen that finds it slower stops before the model gate)."""
    from kernelopt.evaluate import worker_targets
    from kernelopt.evaluate.gate_settings import GateSettings
    from kernelopt.evaluate.session import ProblemSpec

    options = compat.mode_options("max-autotune-no-cudagraphs")
    spec = asdict(ProblemSpec(str(EXAMPLES / problem), overrides, options=options))
    ((variant,),) = worker_targets.graph_variants(spec, [{option: True}], None)
    print("variant", variant)
    assert variant["available"], variant["reason"]
    assert variant["rereads"] == 0 < variant["compiled"]["rereads"]

    settings = GateSettings(model_seeds=(0, 1, 2), trials=30, screen_trials=10)
    result = worker_targets.evaluate_graph(spec, 0, {option: True}, asdict(settings), None)
    gates = {v["gate"]: v for v in result["verdicts"]}
    print({g: (v["passed"], v["reason"][:200]) for g, v in gates.items()}, result.get("screen"), result.get("timings"))
    assert gates["static"]["passed"], gates["static"]
    if "model" not in gates:
        # screened out as slower, which is this GPU's timing, not a fault (the register form ran 0.978x of
        # Inductor's on an H100 here, faster elsewhere; speed is the suite's to report): the screen said so
        # in its own words, and the candidate is judged again without it, for its correctness
        assert gates["performance"]["reason"].startswith("screened out: "), gates["performance"]
        # said in pytest's warnings summary: which run took this path (a -q run did not show it)
        warnings.warn(f"{problem} under {option}: {gates['performance']['reason'][:120]}; judged again unscreened", stacklevel=2)
        settings = replace(settings, screen_trials=0)
        result = worker_targets.evaluate_graph(spec, 0, {option: True}, asdict(settings), None)
        gates = {v["gate"]: v for v in result["verdicts"]}
    assert gates["model"]["passed"], gates["model"]


@pytest.mark.parametrize("option", [CLUSTER_SOFTMAX_OPTION, CLUSTER_SOFTMAX_BULK_OPTION])
def test_the_vocab_log_softmax_is_one_call_of_the_op_and_passes_the_gates(option: str) -> None:
    """Log-softmax over 50257 with a temperature under the cluster softmax, in either of the op's forms."""
    _regenerated_through_the_gates("level1/24_log_softmax_vocab.py", {}, option)


@pytest.mark.parametrize("option", [CLUSTER_NORM_OPTION, CLUSTER_NORM_BULK_OPTION])
def test_row_l2_is_one_call_of_the_norm_op_and_passes_the_gates(option: str) -> None:
    """Row-L2 over 65535 columns (1024 rows: the suite's width, a test's memory) under the cluster norm,
    in either of the op's forms."""
    _regenerated_through_the_gates("level1/10_row_l2_normalize.py", {"batch_size": 1024}, option)


class _Normalize(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.normalize(x, dim=-1)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("option", [CLUSTER_NORM_OPTION, CLUSTER_NORM_BULK_OPTION])
def test_a_16_bit_normalize_compiles_to_the_op_and_is_at_least_as_close_as_torch(built, option, dtype) -> None:
    """The 16-bit rewrite on the GPU: ``F.normalize`` of bf16 or fp16 rows, as Inductor decomposes it (the
    squares summed from ``x`` cast to float32, the root cast back), compiles to one call of the op, whose
    kernel runs (no fallback to torch) on the 16-bit rows and rounds once: its rows are at least as close to
    the float64 ones as torch's own."""
    from conftest import captured_under

    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("thread-block clusters need sm_90")
    torch.manual_seed(0)
    x = (torch.randn(256, 16384, device="cuda") * 3).to(dtype)
    (graph,) = (artifact := captured_under(_Normalize(), x, {option: True})).graphs
    assert graph.source_code.count("torch.ops.kernelopt.row_l2_normalize.default(") == 1, graph.source_code
    row_softmax_op._warn_fallback.cache_clear()
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="kernelopt.row_l2_normalize computed by torch")  # the kernel ran
        got = artifact.compiled(x)
    assert got.dtype == dtype
    exact = x.double() / torch.linalg.vector_norm(x.double(), dim=-1, keepdim=True).clamp_min(1e-12)
    ours, torch_own = (got.double() - exact).abs().max(), (_Normalize()(x).double() - exact).abs().max()
    assert ours <= torch_own, (ours, torch_own)
