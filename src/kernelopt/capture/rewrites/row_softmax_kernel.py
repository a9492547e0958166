"""The CUDA source of kernelopt's row softmax (:mod:`~kernelopt.capture.rewrites.row_softmax_op`), and its build
and launch.

Two kernels, one row a cluster (sm_90: Hopper's thread-block clusters, co-scheduled by the hardware), each
also built as a row's L2 normalisation (``NORM``: ``x / max(||x||, eps)``, the sum of squares exchanged
instead of the max and the sum of exponentials):
each block of the cluster takes its part of the row, in registers (``kopt_row_softmax``: 512 threads x 32
elements, 16-byte loads where rows are aligned) or in shared memory (``kopt_row_softmax_bulk``: the
part's aligned middle by bulk TMA copies in :data:`BULK_PIECES` pieces, each with its mbarrier, the
elements around it by plain loads; one online pass for the max and the sum, 16-byte stores); the blocks
exchange their partial max and sum through distributed shared memory at one cluster barrier and write
their part of the output. One read of the row, one write.

The source needs no PyTorch header: it is built once per machine, source and GPU architecture by nvcc
alone into a shared library (:mod:`~kernelopt.capture.rewrites.cuda_library`, seconds where ``load_inline`` took
50-60 s a dtype pair on the H200) at the op's first CUDA call, for the architecture of the GPU it runs
on, and launched through ``ctypes`` on PyTorch's current stream.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from pathlib import Path

import torch

from kernelopt.capture import compat

THREADS = 512  # per block: two blocks per SM keep reads in flight while the other one reduces or writes
ITEMS = 32  # elements per thread, compiled: a block holds THREADS * ITEMS elements of a row
MAX_CLUSTER = 8  # the portable cluster size
MIN_BLOCKS = 2  # blocks an SM holds at once (__launch_bounds__): on the H200 1 let a thread take registers enough to leave one block an SM, 1.2-1.5x slower
# the NaN-keeping max's body (PTX max.NaN: one instruction, as fmaxf), named for the test that holds it to fmaxf's cost
NAN_MAX_BODY = 'float r;\n  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));\n  return r;'
# the shared-memory form's threads a block: on an H100 (benchmarks/h100-2026-12-05-cluster) 256 ran as fast
# as 512 or up to 4 % faster at every shape but the 65535-wide norm's (equal) with the op's cluster sizes
BULK_THREADS = 256
# The shared-memory form's build (scripts/device/row_softmax_bulk_probe.py times each; on an H100,
# benchmarks/h100-2026-12-05-bulk-variants): its part of a row arrives in this many bulk copies, each with its
# own mbarrier, the threads folding one piece while the next lands (2 ran 1-4 % faster than 1 on float32
# softmax rows, 4 up to 9 % slower than 2); its exponentials by PTX's ex2.approx of values scaled by
# log2(e), as Triton's float32 exp (so Inductor's) compiles, not expf (10-15 % faster on softmax rows,
# its error within 2x the stock compile's); its output by streaming stores (st.global.cs: evict first),
# not plain ones (2-5 % faster)
BULK_PIECES = 2
BULK_FAST_EXP = True
BULK_STREAMING = True

# What every kernelopt cluster kernel's source starts with: the dtypes' conversions, 16-byte packs, a
# cluster launch, shared-memory addresses and 16-byte stores.
CUDA_PRELUDE = r"""
#include <cstdint>
#include <cuda_runtime.h>
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
namespace cg = cooperative_groups;

template <typename T> __device__ __forceinline__ float as_float(T v);
template <> __device__ __forceinline__ float as_float<float>(float v) { return v; }
template <> __device__ __forceinline__ float as_float<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <> __device__ __forceinline__ float as_float<__half>(__half v) { return __half2float(v); }
template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16(v); }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half(v); }

template <typename T, int VEC> struct alignas(sizeof(T) * VEC) Pack { T v[VEC]; };

// rows x clusters blocks of `threads`, one row a cluster of `clusters` blocks, on `stream` (used in place:
// the config points at the struct's own attribute)
struct ClusterLaunch {
  cudaLaunchConfig_t config = {};
  cudaLaunchAttribute attribute[1];
  ClusterLaunch(int64_t rows, int64_t clusters, int threads, size_t smem, cudaStream_t stream) {
    config.gridDim = dim3((unsigned)(rows * clusters));
    config.blockDim = dim3(threads);
    config.dynamicSmemBytes = smem;
    config.stream = stream;
    attribute[0].id = cudaLaunchAttributeClusterDimension;
    attribute[0].val.clusterDim.x = (unsigned)clusters;
    attribute[0].val.clusterDim.y = 1;
    attribute[0].val.clusterDim.z = 1;
    config.attrs = attribute;
    config.numAttrs = 1;
  }
  ClusterLaunch(const ClusterLaunch&) = delete;
  ClusterLaunch& operator=(const ClusterLaunch&) = delete;
};

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

template <typename T> __device__ __forceinline__ void store16(T* p, const T* v, bool streaming) {
  const uint4 bits = *reinterpret_cast<const uint4*>(v);
  if (streaming) __stcs(reinterpret_cast<uint4*>(p), bits);
  else *reinterpret_cast<uint4*>(p) = bits;
}

// A block's part of a row (n elements from src) in shared memory at smem_raw: its 16-byte-aligned middle
// by bulk (TMA) copies in PIECES pieces, each completing its own mbarrier (bars: PIECES of them, in shared
// memory), issued by thread 0 at construction (every thread constructs it: it holds a __syncthreads); the
// elements before it (head) and after it (from tail) are the caller's to load into buf. buf + head is
// 16-byte aligned.
template <typename T, int PIECES>
struct BulkPart {
  static constexpr int VEC = 16 / sizeof(T);
  T* buf;
  int head, tail, vectors, per_piece;
  const Pack<T, VEC>* middle;
  __device__ __forceinline__ BulkPart(const T* src, int n, unsigned char* smem_raw, unsigned long long* bars) {
    const unsigned long long g0 = reinterpret_cast<unsigned long long>(src);
    const unsigned long long gend = g0 + (unsigned long long)n * sizeof(T);
    const unsigned long long a0 = min((g0 + 15ull) & ~15ull, gend);
    const unsigned long long a1 = max(gend & ~15ull, a0);
    head = (int)((a0 - g0) / sizeof(T));
    tail = (int)((a1 - g0) / sizeof(T));
    vectors = (tail - head) / VEC;
    per_piece = (vectors + PIECES - 1) / PIECES;
    buf = reinterpret_cast<T*>(smem_raw + ((16u - (unsigned)(a0 - g0)) & 15u));
    middle = reinterpret_cast<const Pack<T, VEC>*>(buf + head);
    if (threadIdx.x == 0) {
      #pragma unroll
      for (int p = 0; p < PIECES; ++p) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&bars[p])));
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int p = 0; p < PIECES; ++p) {
        const unsigned first = (unsigned)min(p * per_piece, vectors) * 16u;
        const unsigned bytes = (unsigned)min((p + 1) * per_piece, vectors) * 16u - first;
        const unsigned barrier = smem_addr(&bars[p]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(barrier), "r"(bytes) : "memory");
        for (unsigned done = 0; done < bytes; done += 32768u) {
          asm volatile(
              "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
              ::"r"(smem_addr(middle) + first + done), "l"(a0 + first + done), "r"(min(32768u, bytes - done)),
                "r"(barrier) : "memory");
        }
      }
    }
  }
  // the first and past-the-last pack of piece p
  __device__ __forceinline__ int first(int p) const { return p * per_piece; }
  __device__ __forceinline__ int last(int p) const { return min((p + 1) * per_piece, vectors); }
  // until piece p has landed
  __device__ __forceinline__ void wait(unsigned long long* bars, int p) const {
    asm volatile(
        "{\n"
        ".reg .pred ready;\n"
        "WAIT_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 ready, [%0], 0;\n"
        "@!ready bra WAIT_%=;\n"
        "}\n" ::"r"(smem_addr(&bars[p])) : "memory");
  }
};

"""

CUDA_SOURCE = (
    CUDA_PRELUDE
    + r"""
// the larger of two floats, NaN where either is one (fmaxf drops a NaN), as torch's amax: PTX's max.NaN,
// one FMNMX.NAN as fmaxf is one FMNMX (sm_80+). Written as (isnan(a) || a > b) ? a : b it compiled to
// compares and selects interleaved with the row's loads, and the kernel ran 2x slower on the H200 (0.651
// against 0.327 ms, log-softmax 2048 x 50257 fp32; benchmarks/h200-2026-12-04-cluster-softmax, section 6)
__device__ __forceinline__ float nan_max(float a, float b) {
  __NAN_MAX_BODY__
}

template <int THREADS>
__device__ __forceinline__ float block_reduce(float v, float* scratch, bool is_max) {
  #pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    float other = __shfl_xor_sync(0xffffffff, v, offset);
    v = is_max ? nan_max(v, other) : v + other;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < THREADS / 32 ? scratch[lane] : (is_max ? -INFINITY : 0.0f);
    #pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      float other = __shfl_xor_sync(0xffffffff, v, offset);
      v = is_max ? nan_max(v, other) : v + other;
    }
    if (lane == 0) scratch[0] = v;
  }
  __syncthreads();
  v = scratch[0];
  __syncthreads();  // scratch is reused by the next reduction
  return v;
}

// e^x, or 2^x where FAST (the caller's values scaled by log2(e) first): PTX's ex2.approx, as Triton's
// exp of a float32 compiles (so as Inductor's softmax computes it), one instruction where expf is several
template <bool FAST>
__device__ __forceinline__ float exp_of(float x) {
  if constexpr (FAST) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
  } else {
    return expf(x);
  }
}

// The row's max M and what the output needs of its sum S = sum(exp(v - M)), from each block's max m and
// sum s (exp(v - m) over its part), exchanged through distributed shared memory; x - logsumexp(x) (lse)
// takes an infinite max as the logsumexp itself, as torch's logsumexp does. With m = 0 in every block
// (an L2 norm's sum of squares) S is the sum of the blocks' s, each times exp(0) = 1: exact. FAST: the
// blocks' m and M are in log2 units (v * log2(e)) and S = sum(2^(v - M)); shift, the logsumexp, is in
// base e either way.
struct RowStats { float M, S, shift, inv; };

template <bool FAST>
__device__ __forceinline__ RowStats cluster_stats(cg::cluster_group& cluster, float* part, float m, float s,
                                                  bool lse) {
  constexpr float LN2 = 0.6931471805599453f;
  const unsigned blocks = cluster.num_blocks();
  if (threadIdx.x == 0) { part[0] = m; part[1] = s; }
  cluster.sync();
  float M = -INFINITY;
  for (unsigned r = 0; r < blocks; ++r) M = nan_max(M, cluster.map_shared_rank(part, r)[0]);
  float S = 0.0f;
  for (unsigned r = 0; r < blocks; ++r) {
    const float* p = cluster.map_shared_rank(part, r);
    S += p[1] == 0.0f ? 0.0f : p[1] * exp_of<FAST>(p[0] - M);
  }
  cluster.sync();  // every block has read the others' parts: each may now exit
  const float natural = FAST ? M * LN2 : M;
  return {M, S, lse && isinf(M) ? natural : natural + logf(S), 1.0f / S};
}

template <typename TI, typename TO, int ITEMS, int VEC, int THREADS, bool NORM>
__global__ void __launch_bounds__(THREADS, __MIN_BLOCKS__) row_softmax_kernel(
    const TI* __restrict__ x, TO* __restrict__ y, int64_t cols, int64_t chunk, float scale, bool log_out,
    bool lse, float eps) {
  cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank();
  const unsigned blocks = cluster.num_blocks();
  const int64_t row = blockIdx.x / blocks;
  const int64_t start = rank * chunk;
  const int64_t end = min(start + chunk, cols);
  const TI* xr = x + row * cols;
  TO* yr = y + row * cols;
  __shared__ float scratch[32];
  __shared__ float part[2];  // this block's max and its sum of exp(v - max), read by the cluster

  // element j of pack k of this thread: column start + (k * THREADS + thread) * VEC + j; with VEC > 1 the
  // row and chunk are multiples of VEC, so a pack is all in the row or all past its end
  constexpr int PACKS = ITEMS / VEC;
  float v[ITEMS];
  float m = -INFINITY;
  #pragma unroll
  for (int k = 0; k < PACKS; ++k) {
    const int64_t i = start + ((int64_t)k * THREADS + threadIdx.x) * VEC;
    if (i < end) {
      const Pack<TI, VEC> p = *reinterpret_cast<const Pack<TI, VEC>*>(xr + i);
      #pragma unroll
      for (int j = 0; j < VEC; ++j) v[k * VEC + j] = as_float<TI>(p.v[j]) * scale;
    } else {
      #pragma unroll
      for (int j = 0; j < VEC; ++j) v[k * VEC + j] = NORM ? 0.0f : -INFINITY;  // adds nothing to either sum
    }
  }
  float s = 0.0f;
  if constexpr (NORM) {
    m = 0.0f;
    #pragma unroll
    for (int k = 0; k < ITEMS; ++k) s += v[k] * v[k];
  } else {
    #pragma unroll
    for (int k = 0; k < ITEMS; ++k) m = nan_max(m, v[k]);
    m = block_reduce<THREADS>(m, scratch, true);
    #pragma unroll
    for (int k = 0; k < ITEMS; ++k) s += v[k] == -INFINITY ? 0.0f : expf(v[k] - m);  // NaN stays NaN
  }
  s = block_reduce<THREADS>(s, scratch, false);
  const RowStats stats = cluster_stats<false>(cluster, part, m, s, lse);
  const float M = stats.M, shift = stats.shift, inv = stats.inv;
  const float norm = nan_max(sqrtf(stats.S), eps);  // NORM: x / max(||x||, eps), NaN kept as torch keeps it
  #pragma unroll
  for (int k = 0; k < PACKS; ++k) {
    const int64_t i = start + ((int64_t)k * THREADS + threadIdx.x) * VEC;
    if (i < end) {
      Pack<TO, VEC> p;
      #pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const float e = v[k * VEC + j];
        p.v[j] = from_float<TO>(NORM ? e / norm : log_out ? e - shift : expf(e - M) * inv);
      }
      *reinterpret_cast<Pack<TO, VEC>*>(yr + i) = p;
    }
  }
}

template <typename TI, typename TO, int VEC, bool NORM>
static cudaError_t launch_typed(const void* x, void* y, int64_t rows, int64_t cols, int64_t clusters,
                                int64_t chunk, float scale, bool log_out, bool lse, float eps, cudaStream_t stream) {
  constexpr int THREADS = __THREADS__;
  auto kernel = row_softmax_kernel<TI, TO, __ITEMS__, VEC, THREADS, NORM>;
  const ClusterLaunch launch(rows, clusters, THREADS, 0, stream);
  return cudaLaunchKernelEx(&launch.config, kernel, (const TI*)x, (TO*)y, cols, chunk, scale, log_out, lse, eps);
}

template <typename TI, typename TO, bool NORM>
static cudaError_t launch_vec(const void* x, void* y, int64_t rows, int64_t cols, int64_t clusters,
                              bool vectorized, float scale, bool log_out, bool lse, float eps, cudaStream_t stream) {
  // 16 bytes a load where every row and every block's part start on a 16-byte boundary (on the H200 a
  // bfloat16 input's 32-byte float32 packs out ran slower than single floats)
  constexpr int VEC = 16 / sizeof(TI);
  const bool aligned = vectorized && cols % VEC == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(y) % 16 == 0 && sizeof(TO) == sizeof(TI);
  int64_t chunk = (cols + clusters - 1) / clusters;
  if (aligned) {
    chunk = (chunk + VEC - 1) / VEC * VEC;
    return launch_typed<TI, TO, VEC, NORM>(x, y, rows, cols, clusters, chunk, scale, log_out, lse, eps, stream);
  }
  return launch_typed<TI, TO, 1, NORM>(x, y, rows, cols, clusters, chunk, scale, log_out, lse, eps, stream);
}

// The library's entry point, called through ctypes (one input and output type a build, which the caller
// checks): contiguous rows of x into y on the given stream (norm: each row's L2 normalisation, eps the
// least norm divided by); the launch's cudaError_t back.
extern "C" int kopt_row_softmax(const void* x, void* y, int64_t rows, int64_t cols, int64_t clusters,
                                int vectorized, float scale, int log_out, int lse, int norm, float eps,
                                void* stream) {
  if (norm)
    return (int)launch_vec<__IN__, __OUT__, true>(x, y, rows, cols, clusters, vectorized != 0, scale, false, false,
                                                  eps, (cudaStream_t)stream);
  return (int)launch_vec<__IN__, __OUT__, false>(x, y, rows, cols, clusters, vectorized != 0, scale, log_out != 0,
                                                 lse != 0, 0.0f, (cudaStream_t)stream);
}

// The same softmax with each block's part of the row in shared memory: one thread copies the part's
// 16-byte-aligned middle by bulk (TMA) copies in PIECES pieces, each completing its own mbarrier, the few
// elements around it go by plain loads; the threads fold each piece into their running max and sum as it
// lands (one pass, 16 bytes a shared-memory read), reduce the pair once, and write the output 16 bytes a
// store. No load instruction an element, few registers, as many blocks an SM as shared memory holds. On
// the H200 the form that read shared memory one element at a time, in three passes (max, sum, output),
// moved 73-76 % of the copy roofline on softmax rows (benchmarks/h200-2026-12-05-bulk-probe): its compute
// was not hidden behind the loads.
// Fold (m2, s2) into the running max and sum (m, s) of exponentials relative to m; a sum of 0 adds
// nothing (its max may be -inf, whose difference with another -inf is NaN); a NaN max or sum stays.
template <bool FAST>
__device__ __forceinline__ void fold(float& m, float& s, float m2, float s2) {
  const float M = nan_max(m, m2);
  s = (s == 0.0f ? 0.0f : s * exp_of<FAST>(m - M)) + (s2 == 0.0f ? 0.0f : s2 * exp_of<FAST>(m2 - M));
  m = M;
}

// The block's (max, sum) from each thread's, as block_reduce reduces one value (NORM: sums of squares).
template <int THREADS, bool NORM, bool FAST>
__device__ __forceinline__ void block_stats(float& m, float& s, float* scratch) {
  #pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffff, m, offset), s2 = __shfl_xor_sync(0xffffffff, s, offset);
    if constexpr (NORM) s += s2; else fold<FAST>(m, s, m2, s2);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) { scratch[2 * warp] = m; scratch[2 * warp + 1] = s; }
  __syncthreads();
  m = lane < THREADS / 32 ? scratch[2 * lane] : (NORM ? 0.0f : -INFINITY);
  s = lane < THREADS / 32 ? scratch[2 * lane + 1] : 0.0f;
  #pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffff, m, offset), s2 = __shfl_xor_sync(0xffffffff, s, offset);
    if constexpr (NORM) s += s2; else fold<FAST>(m, s, m2, s2);
  }
}

// Fold one value t (already scaled; FAST: by log2(e) too) into this thread's running max and sum: the max
// raised first where t exceeds it (the sum rescaled, one exponential), -inf adding nothing, NaN kept.
template <bool FAST>
__device__ __forceinline__ void take(float& m, float& s, float t) {
  if (t > m) { s = s * exp_of<FAST>(m - t); m = t; }
  if (t != t) m = t;  // a NaN: the row's max is NaN, as nan_max keeps it
  s += t == -INFINITY ? 0.0f : exp_of<FAST>(t - m);
}

template <typename TI, typename TO, int THREADS, bool NORM, int PIECES, bool FAST, bool STREAMING>
__global__ void __launch_bounds__(THREADS) row_softmax_bulk(
    const TI* __restrict__ x, TO* __restrict__ y, int64_t cols, int64_t chunk, float scale, bool log_out,
    bool lse, float eps) {
  constexpr int VEC = 16 / sizeof(TI);  // elements of a 16-byte shared-memory read
  constexpr int OVEC = 16 / sizeof(TO);  // elements of a 16-byte store (VEC or fewer: TO is TI or wider)
  constexpr float LOG2E = 1.4426950408889634f;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ __align__(8) unsigned long long bars[PIECES];
  __shared__ float scratch[64];
  __shared__ float part[2];
  cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank();
  const unsigned blocks = cluster.num_blocks();
  const int64_t row = blockIdx.x / blocks;
  const int64_t start = min((int64_t)rank * chunk, cols);
  const int n = (int)(min(start + chunk, cols) - start);
  const TI* src = x + row * cols + start;
  TO* yr = y + row * cols + start;

  // the part's 16-byte-aligned middle goes by bulk copies; the elements before and after it by loads
  const BulkPart<TI, PIECES> bulk(src, n, smem_raw, bars);
  TI* buf = bulk.buf;
  const int head = bulk.head, tail = bulk.tail;
  const Pack<TI, VEC>* middle = bulk.middle;
  // FAST: exponentials are 2^t of t = v * scale * log2(e), the max and the sum in those units
  const float k = FAST && !NORM ? scale * LOG2E : scale;
  float m = NORM ? 0.0f : -INFINITY, s = 0.0f;
  auto edge = [&](int from, int to) {  // the head or the tail: loaded, kept for the output, folded
    for (int i = from + threadIdx.x; i < to; i += THREADS) {
      const TI v = src[i];
      buf[i] = v;
      const float t = as_float<TI>(v) * k;
      if constexpr (NORM) s += t * t; else take<FAST>(m, s, t);
    }
  };
  edge(0, head);
  edge(tail, n);
  for (int p = 0; p < PIECES; ++p) {
    bulk.wait(bars, p);
    for (int i = bulk.first(p) + threadIdx.x; i < bulk.last(p); i += THREADS) {
      const Pack<TI, VEC> v = middle[i];
      float t[VEC];
      #pragma unroll
      for (int j = 0; j < VEC; ++j) t[j] = as_float<TI>(v.v[j]) * k;
      if constexpr (NORM) {
        #pragma unroll
        for (int j = 0; j < VEC; ++j) s += t[j] * t[j];
      } else {
        float top = t[0];
        #pragma unroll
        for (int j = 1; j < VEC; ++j) top = nan_max(top, t[j]);
        if (top > m) { s = s * exp_of<FAST>(m - top); m = top; }
        if (top != top) m = top;  // a NaN: the row's output is NaN (the sum below becomes NaN too)
        #pragma unroll
        for (int j = 0; j < VEC; ++j) s += t[j] == -INFINITY ? 0.0f : exp_of<FAST>(t[j] - m);
      }
    }
  }
  block_stats<THREADS, NORM, FAST>(m, s, scratch);  // its __syncthreads also publishes the head and tail
  const RowStats stats = cluster_stats<FAST && !NORM>(cluster, part, m, s, lse);  // NORM: m = 0
  const float M = stats.M, shift = stats.shift, inv = stats.inv;
  const float norm = nan_max(sqrtf(stats.S), eps);
  auto out = [&](TI raw) -> TO {
    const float e = as_float<TI>(raw) * scale;
    if constexpr (NORM) return from_float<TO>(e / norm);
    else return from_float<TO>(log_out ? e - shift : exp_of<FAST>(as_float<TI>(raw) * k - M) * inv);
  };
  auto edge_out = [&](int from, int to) { for (int i = from + threadIdx.x; i < to; i += THREADS) yr[i] = out(buf[i]); };
  edge_out(0, head);
  edge_out(tail, n);
  // the middle's output 16 bytes a store: OVEC elements a thread, so that a warp's store is one run of
  // memory (each thread storing its VEC elements as two 16-byte halves, a bfloat16 row's float32 output ran
  // 1.9x slower on the H100)
  TO* ymid = yr + head;
  const Pack<TI, OVEC>* quarter = reinterpret_cast<const Pack<TI, OVEC>*>(buf + head);
  const int packs = (tail - head) / OVEC;
  const bool aligned = (reinterpret_cast<uintptr_t>(ymid) & 15u) == 0;
  for (int i = threadIdx.x; i < packs; i += THREADS) {
    const Pack<TI, OVEC> v = quarter[i];
    Pack<TO, OVEC> o;
    #pragma unroll
    for (int j = 0; j < OVEC; ++j) o.v[j] = out(v.v[j]);
    if (aligned) {
      store16<TO>(ymid + i * OVEC, o.v, STREAMING);
    } else {
      #pragma unroll
      for (int j = 0; j < OVEC; ++j) ymid[i * OVEC + j] = o.v[j];
    }
  }
}

constexpr int MAX_DEVICES = 64;  // devices whose allowed shared memory a kernel remembers

template <int THREADS, bool NORM>
static cudaError_t launch_bulk(const void* x, void* y, int64_t rows, int64_t cols, int64_t clusters, float scale,
                               bool log_out, bool lse, float eps, cudaStream_t stream, int* active) {
  auto kernel = row_softmax_bulk<__IN__, __OUT__, THREADS, NORM, __BULK_PIECES__, __BULK_FAST_EXP__, __BULK_STREAMING__>;
  const int64_t chunk = (cols + clusters - 1) / clusters;
  const size_t smem = (size_t)chunk * sizeof(__IN__) + 16;
  // the shared memory this kernel may ask for, raised once per device and size: asked at every launch it
  // was a runtime call on each launch's host path, and one inside every CUDA-graph capture of it
  static int allowed[MAX_DEVICES] = {};
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  if (device >= MAX_DEVICES || allowed[device] < (int)smem) {
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (err != cudaSuccess) return err;
    if (device < MAX_DEVICES) allowed[device] = (int)smem;
  }
  const ClusterLaunch launch(rows, clusters, THREADS, smem, stream);
  if (active != nullptr) return cudaOccupancyMaxActiveClusters(active, (void*)kernel, &launch.config);
  return cudaLaunchKernelEx(&launch.config, kernel, (const __IN__*)x, (__OUT__*)y, cols, chunk, scale, log_out,
                            lse, eps);
}

template <int THREADS>
static cudaError_t launch_bulk_mode(const void* x, void* y, int64_t rows, int64_t cols, int64_t clusters,
                                    float scale, int log_out, int lse, int norm, float eps, cudaStream_t stream,
                                    int* active) {
  if (norm)
    return launch_bulk<THREADS, true>(x, y, rows, cols, clusters, scale, false, false, eps, stream, active);
  return launch_bulk<THREADS, false>(x, y, rows, cols, clusters, scale, log_out != 0, lse != 0, 0.0f, stream,
                                     active);
}

// Each block's part in shared memory by one bulk copy (256 or 512 threads a block); with active != NULL,
// how many clusters of this shape the GPU holds at once is written there and nothing is launched.
extern "C" int kopt_row_softmax_bulk(const void* x, void* y, int64_t rows, int64_t cols, int64_t clusters,
                                     int threads, float scale, int log_out, int lse, int norm, float eps,
                                     void* stream, int* active) {
  if (threads == 256)
    return (int)launch_bulk_mode<256>(x, y, rows, cols, clusters, scale, log_out, lse, norm, eps,
                                      (cudaStream_t)stream, active);
  return (int)launch_bulk_mode<512>(x, y, rows, cols, clusters, scale, log_out, lse, norm, eps,
                                    (cudaStream_t)stream, active);
}

extern "C" const char* kopt_error_string(int error) { return cudaGetErrorString((cudaError_t)error); }
""".replace("__THREADS__", str(THREADS))
    .replace("__ITEMS__", str(ITEMS))
    .replace("__MIN_BLOCKS__", str(MIN_BLOCKS))
    .replace("__NAN_MAX_BODY__", NAN_MAX_BODY)
)

# each dtype the kernel reads or writes: its C++ type
C_TYPES = {torch.float32: "float", torch.bfloat16: "__nv_bfloat16", torch.float16: "__half"}
DTYPES = tuple(C_TYPES)
# every input and output dtype pair the op launches (one build each): a dtype to itself, and a lower
# precision's to float32 (the op's ``out_float``)
PAIRS = tuple((d, d) for d in DTYPES) + tuple((d, torch.float32) for d in DTYPES if d != torch.float32)
LIBRARY = "kernelopt.row_softmax"  # the builds' name in the build folder


def source_for(
    in_dtype: torch.dtype,
    out_dtype: torch.dtype,
    pieces: int = BULK_PIECES,
    fast_exp: bool = BULK_FAST_EXP,
    streaming: bool = BULK_STREAMING,
) -> str:
    """The CUDA source for one input and output dtype (each pair builds in seconds; all four in one
    source would build every pair's kernels each time); the shared-memory form's pieces, exponentials and
    stores as given (the op's own by default; the probe builds the others)."""
    if pieces < 1:
        raise ValueError(f"pieces must be 1 or more, not {pieces}")
    return (
        CUDA_SOURCE.replace("__IN__", C_TYPES[in_dtype])
        .replace("__OUT__", C_TYPES[out_dtype])
        .replace("__BULK_PIECES__", str(pieces))
        .replace("__BULK_FAST_EXP__", "true" if fast_exp else "false")
        .replace("__BULK_STREAMING__", "true" if streaming else "false")
    )


class BuiltLibrary:
    """A built library of kernelopt's own (every one has ``kopt_error_string``): a launch's CUDA error back
    as a one-line error naming the op."""

    op = "kernelopt.row_softmax"

    def __init__(self, library: ctypes.CDLL) -> None:
        self._error = library.kopt_error_string
        self._error.argtypes = [ctypes.c_int]
        self._error.restype = ctypes.c_char_p

    def _check(self, error: int) -> None:
        if error != 0:
            raise RuntimeError(f"{self.op} launch failed: {self._error(error).decode()} (CUDA error {error})")


class Library(BuiltLibrary):
    """One dtype pair's built kernel, launched through its C entry point (``ctypes``: a few microseconds a
    call, under the op's own Python path)."""

    def __init__(self, library: ctypes.CDLL) -> None:
        super().__init__(library)
        self._launch = library.kopt_row_softmax
        self._launch.argtypes = [
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
            ctypes.c_int, ctypes.c_float, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_float, ctypes.c_void_p,
        ]  # fmt: skip
        self._launch.restype = ctypes.c_int
        self._bulk = library.kopt_row_softmax_bulk
        self._bulk.argtypes = [
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int,
            ctypes.c_float, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_float, ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_int),
        ]  # fmt: skip
        self._bulk.restype = ctypes.c_int

    def run(self, x: torch.Tensor, y: torch.Tensor, clusters: int, vectorized: bool, scale: float, log: bool,
            lse: bool, norm: bool = False, eps: float = 0.0) -> None:  # fmt: skip
        """Launch on the current stream of ``x``'s device (contiguous ``x`` and ``y`` of the pair's dtypes):
        the library's CUDA runtime launches on the current device's context. ``norm``: each row's L2
        normalisation, ``x / max(||x||, eps)``, instead of its softmax."""
        cols = x.shape[-1]
        self._check(_on_device(x, lambda stream: self._launch(
            x.data_ptr(), y.data_ptr(), x.numel() // cols, cols, clusters, int(vectorized), scale, int(log),
            int(lse), int(norm), eps, stream,
        )))  # fmt: skip

    def run_bulk(self, x: torch.Tensor, y: torch.Tensor, clusters: int, threads: int, scale: float, log: bool,
                 lse: bool, norm: bool = False, eps: float = 0.0) -> None:  # fmt: skip
        """The shared-memory form, as :meth:`run` launches the register form (``threads``: 256 or 512)."""
        self._check(self._bulk_call(x, y, clusters, threads, scale, log, lse, norm, eps, None))

    def active_clusters(self, x: torch.Tensor, y: torch.Tensor, clusters: int, threads: int) -> int:
        """How many clusters of the shared-memory form's shape for ``x`` the GPU holds at once."""
        active = ctypes.c_int(0)
        self._check(self._bulk_call(x, y, clusters, threads, 1.0, False, False, False, 0.0, active))
        return active.value

    def _bulk_call(self, x: torch.Tensor, y: torch.Tensor, clusters: int, threads: int, scale: float, log: bool,
                   lse: bool, norm: bool, eps: float, active: ctypes.c_int | None) -> int:  # fmt: skip
        cols = x.shape[-1]
        return _on_device(x, lambda stream: int(self._bulk(
            x.data_ptr(), y.data_ptr(), x.numel() // cols, cols, clusters, threads, scale, int(log), int(lse),
            int(norm), eps, stream, ctypes.byref(active) if active is not None else None,
        )))  # fmt: skip


def _on_device(x: torch.Tensor, launch: Callable[[int], int]) -> int:
    """``launch`` given the handle of the current stream of ``x``'s device, that device current: made
    current only where it is not, since a device guard and a Stream object at every call were a large part
    of the op's host time (a launch-bound graph pays it at each call)."""
    device = x.device.index
    assert device is not None, "a CUDA tensor's device has an index"
    if torch.cuda.current_device() == device:
        return launch(compat.raw_stream(device))
    with torch.cuda.device(device):
        return launch(compat.raw_stream(device))


@functools.cache
def launcher(in_dtype: torch.dtype, out_dtype: torch.dtype, arch: tuple[int, int]) -> Library:
    """The built kernel for one dtype pair and GPU architecture, kept: a call then costs no hashing of
    the source (tens of microseconds a call on the host, which a launch-bound graph would pay). Built for
    ``arch``: clusters need sm_90 code."""
    return built(source_for(in_dtype, out_dtype), arch)


def built(source: str, arch: tuple[int, int]) -> Library:
    """``source`` (the op's, or a variant of it a probe times) built for ``arch`` and loaded."""
    from kernelopt.capture.rewrites.cuda_library import build_library

    return Library(build_library(source, LIBRARY, arch))


def prebuilt(in_dtype: torch.dtype, out_dtype: torch.dtype, arch: tuple[int, int]) -> bool:
    """Whether the op's build for this dtype pair and ``arch`` is already in the build folder, so that a
    machine without nvcc can run the op (:func:`build_all` made it on one with nvcc)."""
    from kernelopt.capture.rewrites.cuda_library import flags_for, library_path

    return library_path(source_for(in_dtype, out_dtype), LIBRARY, flags_for(arch)).is_file()


def build_all(arch: tuple[int, int]) -> list[Path]:
    """The op built for every dtype pair it launches (:data:`PAIRS`) and ``arch``, into the build folder
    (``KERNELOPT_CUDA_BUILD_DIR``): ``kernelopt build-op``, for a machine that has no CUDA toolkit to build it."""
    from kernelopt.capture.rewrites.cuda_library import ensure_built, flags_for

    return [ensure_built(source_for(i, o), LIBRARY, flags_for(arch)) for i, o in PAIRS]
