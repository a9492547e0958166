"""Gate 1 for CUDA C++ candidates: the rules, each with a cheat that breaks it, and the slot contract."""

from __future__ import annotations

import pytest
from static_cheats import assert_refused

from kernelopt.verify.static_cuda import CUDA_RULES, check_static_cuda, cuda_findings

ORIGINAL = """
import triton
import triton.language as tl
from torch._inductor.runtime import triton_helpers, triton_heuristics

@triton_heuristics.pointwise(size_hints={'x': 64}, filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*fp32', 'out_ptr0': '*fp32', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}},
    inductor_meta={'grid_type': 'Grid1D', 'kernel_name': 'triton_poi_double_0', 'mutated_arg_names': []})
@triton.jit
def triton_poi_double_0(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    x0 = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    tl.store(out_ptr0 + (x0), tl.load(in_ptr0 + (x0), x0 < xnumel) * 2, x0 < xnumel)
"""
NAME = "triton_poi_double_0"
HONEST = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

// One thread per element. Comments may name anything: cudaDeviceSynchronize, static, malloc.
__device__ __forceinline__ float twice(float v) { return v * 2.0f; }

__global__ void double_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) {
        float v;
        asm volatile("ld.global.nc.f32 %0, [%1];" : "=f"(v) : "l"(x + i));
        out[i] = twice(v);
    }
}

void launch(torch::Tensor in_ptr0, torch::Tensor out_ptr0, int64_t xnumel) {
    TORCH_CHECK(in_ptr0.is_cuda() && out_ptr0.numel() == xnumel, "no cudaMalloc, no static state");
    const int threads = 256;
    const int64_t blocks = (xnumel + threads - 1) / threads;
    auto stream = at::cuda::getCurrentCUDAStream();
    double_kernel<<<blocks, threads, 0, stream>>>(in_ptr0.data_ptr<float>(), out_ptr0.data_ptr<float>(), xnumel);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""
LAUNCH = "    double_kernel<<<blocks, threads, 0, stream>>>(in_ptr0.data_ptr<float>(), out_ptr0.data_ptr<float>(), xnumel);\n"


def _verdict(source: str):
    return check_static_cuda(source, kernel_name=NAME, original_source=ORIGINAL)


def test_an_honest_kernel_fills_the_slot() -> None:
    verdict = _verdict(HONEST)
    assert verdict.passed, verdict.details.get("violations")
    assert verdict.details["runtime"] == ["in_ptr0", "out_ptr0", "xnumel"] and verdict.details["language"] == "cuda"


CHEATS = {
    # work off the judge's stream, or waits the judge would time
    "another_stream": ("stream", LAUNCH, LAUNCH.replace("0, stream>>>", "0, cudaStreamPerThread>>>")),
    "legacy_default_stream": ("launch", LAUNCH, LAUNCH.replace("<<<blocks, threads, 0, stream>>>", "<<<blocks, threads>>>")),
    "a_stream_of_its_own": (
        "launch",
        "    auto stream = at::cuda::getCurrentCUDAStream();\n",
        "    auto stream = at::cuda::getCurrentCUDAStream();\n    stream = side;\n",
    ),
    "device_sync": ("stream", "    C10_CUDA_KERNEL_LAUNCH_CHECK();", "    cudaDeviceSynchronize();"),
    # other work recorded into a CUDA graph than run when called (a launch-bound model is judged replayed)
    "capture_status": (
        "stream",
        LAUNCH,
        "    if (at::cuda::currentStreamCaptureStatus() != at::cuda::CaptureStatus::None) return;\n" + LAUNCH,
    ),
    "stream_is_capturing": ("stream", LAUNCH, "    cudaStreamCaptureStatus s;\n    cudaStreamIsCapturing(stream, &s);\n" + LAUNCH),
    "launch_api": ("launch", LAUNCH, "    void* args[] = {nullptr};\n    cudaLaunchKernel((void*)double_kernel, 1, 1, args, 0, stream);\n"),
    # a cached result: state that survives the call
    "static_cache": ("state", "    const int threads = 256;", "    static bool done = false;\n    if (done) return;\n    done = true;\n    const int threads = 256;"),
    "device_global_cache": ("state", "__global__ void double_kernel", "__device__ int calls;\n__global__ void double_kernel"),
    "extern_symbol": ("state", "__global__ void double_kernel", 'extern int judge_state;\n__global__ void double_kernel'),
    # PyTorch does the work, or allocates
    "torch_fallback": ("torch_op", LAUNCH, "    out_ptr0.copy_(in_ptr0 * 2);\n"),
    "host_arithmetic": ("torch_op", LAUNCH, "    auto doubled = in_ptr0 + in_ptr0;\n" + LAUNCH),
    "torch_allocation": ("torch_op", LAUNCH, "    auto tmp = torch::empty_like(in_ptr0);\n" + LAUNCH),
    "using_namespace": ("torch_op", "void launch(", "using namespace torch;\nvoid launch("),
    "malloc": ("allocation", "    const int threads = 256;", "    float* host = (float*)malloc(64);\n    const int threads = 256;"),
    "cuda_malloc": ("allocation", "    const int threads = 256;", "    float* d;\n    cudaMalloc(&d, 64);\n    const int threads = 256;"),
    # the outside world
    "file": ("io", "    const int threads = 256;", '    FILE* f = fopen("/tmp/x", "w");\n    const int threads = 256;'),
    "environment": ("io", "    const int threads = 256;", '    const char* key = getenv("OPENAI_API_KEY");\n    const int threads = 256;'),
    "printing": ("io", "        out[i] = twice(v);", '        printf("%f", v);\n        out[i] = twice(v);'),
    # clocks
    "device_clock": ("timer", "        out[i] = twice(v);", "        long long t = clock64();\n        out[i] = twice(v);"),
    "globaltimer_asm": (
        "inline_asm",
        "        out[i] = twice(v);",
        '        unsigned long long t;\n        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));\n        out[i] = twice(v);',
    ),
    "unknown_ptx": ("inline_asm", '"ld.global.nc.f32 %0, [%1];"', '"trap;"'),
    # the preprocessor as a way round the word rules
    "token_pasting": (
        "preprocessor",
        "    C10_CUDA_KERNEL_LAUNCH_CHECK();",
        "#define CAT(a, b) a##b\n    CAT(cudaDevice, Synchronize)();",
    ),
    "foreign_header": ("preprocessor", "#include <torch/extension.h>", "#include <torch/extension.h>\n#include <thread>"),
    "conditional_code": ("preprocessor", "    const int threads = 256;", "#ifdef JUDGE\n    const int threads = 256;\n#endif"),
    # the slot contract
    "missing_parameter": ("signature", "torch::Tensor out_ptr0, int64_t xnumel)", "torch::Tensor out_ptr0)"),
    "pointer_as_scalar": ("signature", "void launch(torch::Tensor in_ptr0,", "void launch(int64_t in_ptr0,"),
    "second_entry": ("entry", "void launch(", "void launch(int64_t x) {}\nvoid launch("),
    "no_kernel": ("entry", "__global__ void double_kernel", "__device__ void double_kernel"),
}


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_each_cheat_is_refused_by_its_rule(name: str) -> None:
    assert_refused(_verdict, HONEST, CHEATS[name], CUDA_RULES)


def test_every_rule_has_a_cheat() -> None:
    assert {rule for rule, _, _ in CHEATS.values()} == set(CUDA_RULES) - {"size"}
    assert [f.rule for f in cuda_findings("x" * 2_000_000)] == ["size"]


def test_strings_and_comments_neither_hide_nor_fake_a_construct() -> None:
    faked = HONEST.replace('"no cudaMalloc, no static state"', '"static cudaStreamCreate clock64 fopen"')
    assert _verdict(faked).passed  # words in a string are not code
    hidden = HONEST.replace("    C10_CUDA_KERNEL_LAUNCH_CHECK();", "    /* a comment */ cudaDeviceSynchronize(); // here")
    assert {v["rule"] for v in _verdict(hidden).details["violations"]} == {"stream"}


def test_literals_and_comments_are_blanked_in_place() -> None:
    from kernelopt.verify.static_cuda import _scrub

    source = 'a "x\\"y" b // c\n/* d\n e */ f R"DL(raw "q")DL" \'c\' "open\nnext'
    scrubbed = _scrub(source)
    assert len(scrubbed.code) == len(source) and scrubbed.code.count("\n") == source.count("\n")
    assert scrubbed.code.split() == ['a', '"', '"', 'b', 'f', 'R"', '"', "'", "'", '"', "next"]
    assert [text for _, text in scrubbed.strings] == ['x\\"y', 'raw "q"', "open"]


@pytest.mark.timeout(120)  # a guard that the check ends, not a speed target: several took from 20 s to minutes before
@pytest.mark.parametrize("unit", ['"a" asm(', 'asm("a"', "/*", 'R"(', '"', "int a b c ", "<<<", "__device__ "])
def test_a_megabyte_of_unterminated_constructs_is_checked_in_one_pass(unit: str) -> None:
    from kernelopt.verify.static_rules import MAX_SOURCE_CHARS

    blob = (unit * (MAX_SOURCE_CHARS // len(unit)))[:MAX_SOURCE_CHARS]
    findings = cuda_findings(blob)
    assert findings and all(f.rule in CUDA_RULES for f in findings)
