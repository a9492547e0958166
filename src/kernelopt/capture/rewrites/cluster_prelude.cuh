// What every kernelopt cluster kernel's source starts with (row_softmax_kernel.py puts it before each
// kernel's file): the dtypes' conversions, 16-byte packs, a cluster launch, shared-memory addresses and
// 16-byte stores.

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

constexpr int MAX_DEVICES = 64;  // devices whose allowed shared memory a kernel remembers

// kernel's dynamic shared memory raised to smem and, for clusters past 8 blocks, Hopper's non-portable
// cluster sizes allowed: once per device, kernel and size (asked at every launch it was a runtime call on
// each launch's host path, and one inside every CUDA-graph capture of it), each kernel remembering its own
// (statics per kernel, not per signature)
template <auto kernel>
static cudaError_t allow(size_t smem, int64_t clusters) {
  static int allowed[MAX_DEVICES] = {};
  static bool non_portable[MAX_DEVICES] = {};
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  if (device >= MAX_DEVICES || allowed[device] < (int)smem) {
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (err != cudaSuccess) return err;
    if (device < MAX_DEVICES) allowed[device] = (int)smem;
  }
  if (clusters > 8 && (device >= MAX_DEVICES || !non_portable[device])) {
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    if (err != cudaSuccess) return err;
    if (device < MAX_DEVICES) non_portable[device] = true;
  }
  return cudaSuccess;
}
