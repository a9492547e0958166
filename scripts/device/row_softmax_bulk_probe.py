"""Probe: the row softmax with each block's part of the row copied into shared memory by one bulk (TMA)
copy, against the op as built and the best stock compile, for every cluster size and block width that
holds the row.

    PYTHONPATH=src python3 scripts/device/row_softmax_bulk_probe.py

What section 4 of ``benchmarks/h200-2026-12-04-cluster-softmax`` left to try: the op holds each block's
part in registers (512 threads x 32 elements, two blocks an SM), so an SM alternates between reading its
two blocks' parts and writing them, and the kernel moves about 2.5 TB/s (59 % of the copy roofline at
2048 x 50257). Here one thread issues a ``cp.async.bulk`` of the block's 16-byte-aligned middle into
shared memory (the few elements before and after it by plain loads), every thread waits on an mbarrier,
and the max, the sum and the output are computed from shared memory: no per-element load instructions,
few registers, and as many blocks an SM as shared memory holds, at different phases. The grid is the
op's (one row a cluster); the cluster exchange is the op's.

One JSON line per case and shape as it is measured: the largest error against float64 (the op's and the
stock compile's beside it), the clusters the GPU holds at once for the shape, and the kernel timed
interleaved with ``torch.compile(mode="max-autotune-no-cudagraphs")`` of the same function in this
process (``kernelopt.measure.compare``: L2 flushed, 30 rounds; medians in ms). Needs an sm_90 GPU and nvcc.
Not part of the op until it measures faster.
"""

from __future__ import annotations

import ctypes
import json
import time

import torch

from kernelopt.capture import row_softmax_op as op
from kernelopt.capture.cuda_library import build_library
from kernelopt.measure import compare

MAX_SMEM = 227 * 1024  # bytes of shared memory one block of an sm_90 GPU may have
THREADS = (256, 512)

# the op's helpers (includes, conversions, the NaN-keeping max, the block reduction), then the bulk kernel
HELPERS = op.CUDA_SOURCE.split("template <typename T, int VEC> struct alignas", 1)[0]
BULK = r"""
__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

template <typename TI, typename TO, int THREADS>
__global__ void __launch_bounds__(THREADS) row_softmax_bulk(
    const TI* __restrict__ x, TO* __restrict__ y, int64_t cols, int64_t chunk, float scale, bool log_out,
    bool lse) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ __align__(8) unsigned long long bar;
  __shared__ float scratch[32];
  __shared__ float part[2];
  cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank();
  const unsigned blocks = cluster.num_blocks();
  const int64_t row = blockIdx.x / blocks;
  const int64_t start = min((int64_t)rank * chunk, cols);
  const int n = (int)(min(start + chunk, cols) - start);
  const TI* src = x + row * cols + start;
  TO* yr = y + row * cols + start;

  // the part's 16-byte-aligned middle goes by one bulk copy; the elements before and after it by loads
  const unsigned long long g0 = reinterpret_cast<unsigned long long>(src);
  const unsigned long long gend = g0 + (unsigned long long)n * sizeof(TI);
  const unsigned long long a0 = min((g0 + 15ull) & ~15ull, gend);
  const unsigned long long a1 = max(gend & ~15ull, a0);
  const int head = (int)((a0 - g0) / sizeof(TI));
  const int tail = (int)((a1 - g0) / sizeof(TI));
  const unsigned bytes = (unsigned)(a1 - a0);
  TI* buf = reinterpret_cast<TI*>(smem_raw + ((16u - (unsigned)(a0 - g0)) & 15u));  // buf + head: 16-aligned
  const unsigned barrier = smem_addr(&bar);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(barrier));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(barrier), "r"(bytes) : "memory");
    for (unsigned done = 0; done < bytes; done += 32768u) {
      const unsigned size = min(32768u, bytes - done);
      asm volatile(
          "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
          ::"r"(smem_addr(buf + head) + done), "l"(a0 + done), "r"(size), "r"(barrier) : "memory");
    }
  }
  for (int i = threadIdx.x; i < head; i += THREADS) buf[i] = src[i];
  for (int i = tail + threadIdx.x; i < n; i += THREADS) buf[i] = src[i];
  asm volatile(
      "{\n"
      ".reg .pred ready;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 ready, [%0], 0;\n"
      "@!ready bra WAIT;\n"
      "}\n" ::"r"(barrier) : "memory");
  __syncthreads();  // the loads of the head and tail are in shared memory too

  float m = -INFINITY;
  for (int i = threadIdx.x; i < n; i += THREADS) m = nan_max(m, as_float<TI>(buf[i]) * scale);
  m = block_reduce<THREADS>(m, scratch, true);
  float s = 0.0f;
  for (int i = threadIdx.x; i < n; i += THREADS) {
    const float v = as_float<TI>(buf[i]) * scale;
    s += v == -INFINITY ? 0.0f : expf(v - m);  // NaN stays NaN
  }
  s = block_reduce<THREADS>(s, scratch, false);
  if (threadIdx.x == 0) { part[0] = m; part[1] = s; }
  cluster.sync();
  float M = -INFINITY;
  for (unsigned r = 0; r < blocks; ++r) M = nan_max(M, cluster.map_shared_rank(part, r)[0]);
  float S = 0.0f;
  for (unsigned r = 0; r < blocks; ++r) {
    const float* p = cluster.map_shared_rank(part, r);
    S += p[1] == 0.0f ? 0.0f : p[1] * expf(p[0] - M);
  }
  cluster.sync();  // every block has read the others' parts: each may now exit
  const float shift = lse && isinf(M) ? M : M + logf(S), inv = 1.0f / S;
  for (int i = threadIdx.x; i < n; i += THREADS) {
    const float e = as_float<TI>(buf[i]) * scale;
    yr[i] = from_float<TO>(log_out ? e - shift : expf(e - M) * inv);
  }
}

template <int THREADS>
static cudaError_t launch_bulk(const void* x, void* y, int64_t rows, int64_t cols, int64_t clusters, float scale,
                               bool log_out, bool lse, cudaStream_t stream, int* active) {
  auto kernel = row_softmax_bulk<__IN__, __OUT__, THREADS>;
  const int64_t chunk = (cols + clusters - 1) / clusters;
  const size_t smem = (size_t)chunk * sizeof(__IN__) + 16;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (err != cudaSuccess) return err;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3((unsigned)(rows * clusters));
  config.blockDim = dim3(THREADS);
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeClusterDimension;
  attribute[0].val.clusterDim.x = (unsigned)clusters;
  attribute[0].val.clusterDim.y = 1;
  attribute[0].val.clusterDim.z = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  if (active != nullptr) return cudaOccupancyMaxActiveClusters(active, (void*)kernel, &config);
  return cudaLaunchKernelEx(&config, kernel, (const __IN__*)x, (__OUT__*)y, cols, chunk, scale, log_out, lse);
}

// active != NULL: how many clusters of this shape the GPU holds at once, written there; nothing launched
extern "C" int kopt_row_softmax_bulk(const void* x, void* y, int64_t rows, int64_t cols, int64_t clusters,
                                     int threads, float scale, int log_out, int lse, void* stream, int* active) {
  if (threads == 256)
    return (int)launch_bulk<256>(x, y, rows, cols, clusters, scale, log_out != 0, lse != 0, (cudaStream_t)stream, active);
  return (int)launch_bulk<512>(x, y, rows, cols, clusters, scale, log_out != 0, lse != 0, (cudaStream_t)stream, active);
}

extern "C" const char* kopt_error_string(int error) { return cudaGetErrorString((cudaError_t)error); }
"""


def bulk_source(in_dtype: torch.dtype, out_dtype: torch.dtype) -> str:
    """The probe's kernel for one dtype pair: the op's helpers, then the bulk kernel."""
    text = HELPERS + BULK
    return text.replace("__IN__", op.C_TYPES[in_dtype]).replace("__OUT__", op.C_TYPES[out_dtype])


class Bulk:
    """One dtype pair's bulk kernel, launched through ctypes as the op's library is."""

    def __init__(self, in_dtype: torch.dtype, out_dtype: torch.dtype) -> None:
        library = build_library(
            bulk_source(in_dtype, out_dtype), "kernelopt.row_softmax_bulk", torch.cuda.get_device_capability()
        )
        self._launch = library.kopt_row_softmax_bulk
        self._launch.argtypes = [
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_int64,
            ctypes.c_int64,
            ctypes.c_int64,
            ctypes.c_int,
            ctypes.c_float,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_int),
        ]
        self._launch.restype = ctypes.c_int
        self._error = library.kopt_error_string
        self._error.argtypes = [ctypes.c_int]
        self._error.restype = ctypes.c_char_p

    def _call(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        clusters: int,
        threads: int,
        scale: float,
        log: bool,
        lse: bool,
        active: ctypes.c_int | None,
    ) -> None:
        cols = x.shape[-1]
        error = self._launch(
            x.data_ptr(),
            y.data_ptr(),
            x.numel() // cols,
            cols,
            clusters,
            threads,
            scale,
            int(log),
            int(lse),
            torch.cuda.current_stream().cuda_stream,
            ctypes.byref(active) if active is not None else None,
        )
        if error != 0:
            raise RuntimeError(f"bulk kernel: {self._error(error).decode()} (CUDA error {error})")

    def run(
        self, x: torch.Tensor, y: torch.Tensor, clusters: int, threads: int, scale: float, log: bool, lse: bool = False
    ) -> None:
        self._call(x, y, clusters, threads, scale, log, lse, None)

    def active_clusters(self, x: torch.Tensor, y: torch.Tensor, clusters: int, threads: int) -> int:
        active = ctypes.c_int(0)
        self._call(x, y, clusters, threads, 1.0, False, False, active)
        return active.value


CASES = [  # rows, columns, dtype, log, scale, out_float, lse
    (2048, 50257, torch.float32, True, 1 / 0.7, False, False),  # the suite's log-softmax over a vocabulary
    (1024, 128256, torch.bfloat16, True, 1.0, True, True),  # the suite's token log-probs
    (4096, 65536, torch.float32, False, 1.0, False, False),  # the suite's softmax-wide
    (4096, 16384, torch.float32, False, 1.0, False, False),
    (4096, 32000, torch.bfloat16, True, 1.0, True, False),
    (2048, 131072, torch.float32, True, 1.0, False, False),  # the suite's log-softmax-wide
]


def main() -> None:
    arch = torch.cuda.get_device_capability()
    for rows, cols, dtype, log, scale, out_float, lse in CASES:
        out_dtype = torch.float32 if out_float else dtype
        started = time.monotonic()
        bulk, ours = Bulk(dtype, out_dtype), op.launcher(dtype, out_dtype, arch)
        print(
            json.dumps({"cols": cols, "dtype": str(dtype), "built_s": round(time.monotonic() - started, 1)}), flush=True
        )
        x = torch.randn(rows, cols, device="cuda", dtype=dtype) * 3

        def stock(
            x: torch.Tensor = x, log: bool = log, scale: float = scale, out_float: bool = out_float, lse: bool = lse
        ) -> torch.Tensor:
            y = x.float() * scale
            if lse:
                out = y - torch.logsumexp(y, dim=-1, keepdim=True)
            else:
                out = torch.log_softmax(y, dim=-1) if log else torch.softmax(y, dim=-1)
            return out if out_float else out.to(x.dtype)

        compiled = torch.compile(stock, mode="max-autotune-no-cudagraphs")
        compiled()
        exact = op.reference(x.double(), scale, log, True, lse)
        stock_err = (compiled().double() - exact).abs().max().item()
        y = torch.empty(x.shape, dtype=out_dtype, device="cuda")
        blocks = op.cluster_blocks(cols)
        shapes: list[tuple[str, int, int]] = [("op", blocks or 0, 512)] if blocks else []
        shapes += [
            ("bulk", c, t) for c in (1, 2, 4, 8) for t in THREADS if -(-cols // c) * dtype.itemsize + 16 <= MAX_SMEM
        ]
        for kind, clusters, threads in shapes:
            row = {
                "rows": rows,
                "cols": cols,
                "dtype": str(dtype),
                "kind": kind,
                "clusters": clusters,
                "threads": threads,
            }
            try:
                if kind == "op":

                    def call(clusters: int = clusters) -> None:
                        ours.run(x, y, clusters, True, scale, log, lse)
                else:
                    row["active_clusters"] = bulk.active_clusters(x, y, clusters, threads)

                    def call(clusters: int = clusters, threads: int = threads) -> None:
                        bulk.run(x, y, clusters, threads, scale, log, lse)

                y.fill_(float("nan"))
                call()
                torch.cuda.synchronize()
                row["max_abs_err"] = (y.double() - exact).abs().max().item()
                row["stock_max_abs_err"] = stock_err
                timed = compare(lambda: compiled(), call, device="cuda", trials=30)
            except Exception as exc:  # a shape the GPU refuses: said, and the next one measured
                print(json.dumps({**row, "error": f"{type(exc).__name__}: {exc}"[:300]}), flush=True)
                continue
            moved = x.numel() * (x.element_size() + y.element_size())
            row.update(
                stock_ms=round(timed.baseline.median_ms, 4),
                kernel_ms=round(timed.candidate.median_ms, 4),
                speedup=round(timed.speedup, 3),
                tb_per_s=round(moved / (timed.candidate.median_ms * 1e-3) / 1e12, 2),
            )
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
