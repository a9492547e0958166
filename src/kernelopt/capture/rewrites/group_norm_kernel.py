"""The CUDA source of kernelopt's group norm (:mod:`~kernelopt.capture.rewrites.group_norm_op`), and its build
and launch.

Inductor writes a group norm over groups wider than a program holds as two kernels: the groups'
statistics (one read of the input), then the output (a second read); every one-kernel form Inductor can
be given ran slower on the H100 (``kernelopt.group_rows``' docstring). Here one group is one thread-block
cluster (sm_90): each block copies its part of the group into shared memory by bulk copies
(``BulkPart``), sums it as it lands, then sums its squared deviations from its own mean (a second pass
over shared memory, not memory); the blocks exchange their count, sum and sum of squared deviations
through distributed shared memory at one cluster barrier and combine them (Chan's parallel variance:
no cancellation of a sum of squares less a squared mean), and each block writes its part as
``x * a[c] + b[c]`` (``a = rstd * weight[c]``, ``b = bias[c] - mean * a``). One read of the group, one
write.

A group of 8 channels x 256 x 256 float32 is 2 MB: more than the 8 blocks of a portable cluster hold in
227 KB of shared memory each, so the kernel may launch clusters of 16 (Hopper's non-portable size).
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import torch

from kernelopt.capture.rewrites.row_softmax_kernel import C_TYPES, CUDA_PRELUDE, BuiltLibrary, _on_device

THREADS = 256  # per block
PIECES = 2  # bulk copies a block's part arrives in, as the row softmax's shared-memory form
MAX_CLUSTER = 16  # Hopper's non-portable cluster size
PART_BYTES_LIMIT = 227 * 1024  # the shared memory a block may ask for on sm_90
DTYPES = tuple(C_TYPES)
LIBRARY = "kernelopt.group_norm"  # the builds' name in the build folder

CUDA_SOURCE = (
    CUDA_PRELUDE
    + r"""
// v summed over the block, in every thread (scratch: 32 floats, reused by the next call)
template <int THREADS>
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  #pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffff, v, offset);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < THREADS / 32 ? scratch[lane] : 0.0f;
  #pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffff, v, offset);
  __syncthreads();
  return v;
}

// One group (cols elements: channels_per_group channels of hw each) a cluster; row r of x is group
// r % groups of sample r / groups. weight and bias: float32 by channel, or null (1 and 0).
template <typename T, int THREADS, int PIECES>
__global__ void __launch_bounds__(THREADS) group_norm_bulk(
    const T* __restrict__ x, T* __restrict__ y, const float* __restrict__ weight, const float* __restrict__ bias,
    int64_t cols, int64_t chunk, int64_t hw, int64_t channels_per_group, int64_t groups, float eps) {
  constexpr int VEC = 16 / sizeof(T);
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ __align__(8) unsigned long long bars[PIECES];
  __shared__ float scratch[32];
  __shared__ float part[3];  // this block's count, sum and sum of squared deviations, read by the cluster
  cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank();
  const unsigned blocks = cluster.num_blocks();
  const int64_t row = blockIdx.x / blocks;
  const int64_t start = min((int64_t)rank * chunk, cols);
  const int n = (int)(min(start + chunk, cols) - start);
  const T* src = x + row * cols + start;
  T* dst = y + row * cols + start;
  const BulkPart<T, PIECES> bulk(src, n, smem_raw, bars);
  T* buf = bulk.buf;

  // pass 1, as the part lands: its sum
  float s = 0.0f;
  auto edge = [&](int from, int to) {
    for (int i = from + threadIdx.x; i < to; i += THREADS) {
      const T v = src[i];
      buf[i] = v;
      s += as_float<T>(v);
    }
  };
  edge(0, bulk.head);
  edge(bulk.tail, n);
  for (int p = 0; p < PIECES; ++p) {
    bulk.wait(bars, p);
    for (int i = bulk.first(p) + threadIdx.x; i < bulk.last(p); i += THREADS) {
      const Pack<T, VEC> v = bulk.middle[i];
      #pragma unroll
      for (int j = 0; j < VEC; ++j) s += as_float<T>(v.v[j]);
    }
  }
  s = block_sum<THREADS>(s, scratch);  // its __syncthreads also publishes the head and tail
  const float local_mean = n > 0 ? s / (float)n : 0.0f;
  // pass 2, over shared memory: the squared deviations from the part's own mean
  float q = 0.0f;
  for (int i = threadIdx.x; i < bulk.head; i += THREADS) { const float d = as_float<T>(buf[i]) - local_mean; q += d * d; }
  for (int i = bulk.tail + threadIdx.x; i < n; i += THREADS) { const float d = as_float<T>(buf[i]) - local_mean; q += d * d; }
  for (int i = threadIdx.x; i < bulk.vectors; i += THREADS) {
    const Pack<T, VEC> v = bulk.middle[i];
    #pragma unroll
    for (int j = 0; j < VEC; ++j) { const float d = as_float<T>(v.v[j]) - local_mean; q += d * d; }
  }
  q = block_sum<THREADS>(q, scratch);
  if (threadIdx.x == 0) { part[0] = (float)n; part[1] = s; part[2] = q; }
  cluster.sync();
  float total = 0.0f;
  for (unsigned r = 0; r < blocks; ++r) total += cluster.map_shared_rank(part, r)[1];
  const float mean = total / (float)cols;
  float m2 = 0.0f;
  for (unsigned r = 0; r < blocks; ++r) {
    const float* p = cluster.map_shared_rank(part, r);
    if (p[0] > 0.0f) {
      const float d = p[1] / p[0] - mean;
      m2 += p[2] + p[0] * d * d;
    }
  }
  cluster.sync();  // every block has read the others' parts: each may now exit
  const float rstd = rsqrtf(m2 / (float)cols + eps);
  const int64_t channel0 = (row % groups) * channels_per_group;
  // element e of the part (column start + e): its channel's a and b
  auto scale_shift = [&](int64_t c, float& a, float& b) {
    a = rstd * (weight != nullptr ? weight[channel0 + c] : 1.0f);
    b = (bias != nullptr ? bias[channel0 + c] : 0.0f) - mean * a;
  };
  auto edge_out = [&](int from, int to) {
    for (int i = from + threadIdx.x; i < to; i += THREADS) {
      float a, b;
      scale_shift((start + i) / hw, a, b);
      dst[i] = from_float<T>(as_float<T>(buf[i]) * a + b);
    }
  };
  edge_out(0, bulk.head);
  edge_out(bulk.tail, n);
  // the middle 16 bytes a store where the output is aligned as the input (element by element where an
  // input with a storage offset is not); hw >= VEC (the caller's check), so a pack spans at most two channels
  T* ymid = dst + bulk.head;
  const bool aligned = (reinterpret_cast<uintptr_t>(ymid) & 15u) == 0;
  for (int i = threadIdx.x; i < bulk.vectors; i += THREADS) {
    const Pack<T, VEC> v = bulk.middle[i];
    const int64_t col = start + bulk.head + (int64_t)i * VEC;
    const int64_t c = col / hw;
    const int64_t next = (c + 1) * hw - col;  // elements of the pack in channel c
    float a0, b0, a1 = 0.0f, b1 = 0.0f;
    scale_shift(c, a0, b0);
    if (next < VEC) scale_shift(c + 1, a1, b1);
    Pack<T, VEC> o;
    #pragma unroll
    for (int j = 0; j < VEC; ++j) o.v[j] = from_float<T>(as_float<T>(v.v[j]) * (j < next ? a0 : a1) + (j < next ? b0 : b1));
    if (aligned) {
      store16<T>(ymid + (int64_t)i * VEC, o.v, true);
    } else {
      #pragma unroll
      for (int j = 0; j < VEC; ++j) ymid[(int64_t)i * VEC + j] = o.v[j];
    }
  }
}

constexpr int MAX_DEVICES = 64;  // devices whose allowed shared memory the kernel remembers

// rows groups of cols elements, one a cluster of `clusters` blocks; with active != NULL, how many such
// clusters the GPU holds at once is written there and nothing is launched.
extern "C" int kopt_group_norm(const void* x, void* y, const float* weight, const float* bias, int64_t rows,
                               int64_t cols, int64_t hw, int64_t channels_per_group, int64_t groups,
                               int64_t clusters, float eps, void* stream, int* active) {
  auto kernel = group_norm_bulk<__T__, __THREADS__, __PIECES__>;
  const int64_t chunk = (cols + clusters - 1) / clusters;
  const size_t smem = (size_t)chunk * sizeof(__T__) + 16;
  // raised once per device and size, as the row softmax's shared-memory form does (not inside a CUDA graph)
  static int allowed[MAX_DEVICES] = {};
  static bool non_portable[MAX_DEVICES] = {};
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return (int)err;
  if (device >= MAX_DEVICES || allowed[device] < (int)smem) {
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (err != cudaSuccess) return (int)err;
    if (device < MAX_DEVICES) allowed[device] = (int)smem;
  }
  if (clusters > 8 && (device >= MAX_DEVICES || !non_portable[device])) {
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    if (err != cudaSuccess) return (int)err;
    if (device < MAX_DEVICES) non_portable[device] = true;
  }
  const ClusterLaunch launch(rows, clusters, __THREADS__, smem, (cudaStream_t)stream);
  if (active != nullptr) return (int)cudaOccupancyMaxActiveClusters(active, (void*)kernel, &launch.config);
  return (int)cudaLaunchKernelEx(&launch.config, kernel, (const __T__*)x, (__T__*)y, weight, bias, cols, chunk, hw,
                                 channels_per_group, groups, eps);
}

extern "C" const char* kopt_error_string(int error) { return cudaGetErrorString((cudaError_t)error); }
"""
)


def source_for(dtype: torch.dtype) -> str:
    """The CUDA source for one dtype (the input's and the output's)."""
    return (
        CUDA_SOURCE.replace("__T__", C_TYPES[dtype])
        .replace("__THREADS__", str(THREADS))
        .replace("__PIECES__", str(PIECES))
    )


class Library(BuiltLibrary):
    """One dtype's built kernel, launched through its C entry point."""

    op = "kernelopt.group_norm"

    def __init__(self, library: ctypes.CDLL) -> None:
        super().__init__(library)
        self._launch = library.kopt_group_norm
        self._launch.argtypes = [
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
            ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_float, ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_int),
        ]  # fmt: skip
        self._launch.restype = ctypes.c_int

    def run(self, x: torch.Tensor, y: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None,
            groups: int, clusters: int, eps: float) -> None:  # fmt: skip
        """Launch on the current stream of ``x``'s device: contiguous ``x`` (``N, C, ...``) into ``y``,
        ``weight`` and ``bias`` contiguous float32 of ``C`` elements or None."""
        self._check(self._call(x, y, weight, bias, groups, clusters, eps, None))

    def active_clusters(self, x: torch.Tensor, groups: int, clusters: int) -> int:
        """How many clusters of this shape for ``x`` the GPU holds at once (0: none fits)."""
        active = ctypes.c_int(0)
        self._check(self._call(x, x, None, None, groups, clusters, 0.0, active))
        return active.value

    def _call(self, x: torch.Tensor, y: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None,
              groups: int, clusters: int, eps: float, active: ctypes.c_int | None) -> int:  # fmt: skip
        n, channels = x.shape[0], x.shape[1]
        hw = x.numel() // (n * channels)
        per_group = channels // groups
        return _on_device(x, lambda stream: int(self._launch(
            x.data_ptr(), y.data_ptr(), weight.data_ptr() if weight is not None else None,
            bias.data_ptr() if bias is not None else None, n * groups, per_group * hw, hw, per_group, groups,
            clusters, eps, stream, ctypes.byref(active) if active is not None else None,
        )))  # fmt: skip


@functools.cache
def launcher(dtype: torch.dtype, arch: tuple[int, int]) -> Library:
    """The built kernel for one dtype and GPU architecture, kept (no hashing of the source per call)."""
    from kernelopt.capture.rewrites.cuda_library import build_library

    return Library(build_library(source_for(dtype), LIBRARY, arch))


def build_all(arch: tuple[int, int]) -> list[Path]:
    """The op built for every dtype and ``arch`` into the build folder (``kernelopt build-op``)."""
    from kernelopt.capture.rewrites.cuda_library import ensure_built

    return [ensure_built(source_for(dtype), LIBRARY, arch) for dtype in DTYPES]


def prebuilt(dtype: torch.dtype, arch: tuple[int, int]) -> bool:
    """Whether the build for ``dtype`` and ``arch`` is already in the build folder (``kernelopt build-op``)."""
    from kernelopt.capture.rewrites.cuda_library import library_path

    return library_path(source_for(dtype), LIBRARY, arch).is_file()
