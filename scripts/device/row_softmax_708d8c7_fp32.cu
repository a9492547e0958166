
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
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

template <int THREADS>
__device__ __forceinline__ float block_reduce(float v, float* scratch, bool is_max) {
  #pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    float other = __shfl_xor_sync(0xffffffff, v, offset);
    v = is_max ? fmaxf(v, other) : v + other;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < THREADS / 32 ? scratch[lane] : (is_max ? -INFINITY : 0.0f);
    #pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      float other = __shfl_xor_sync(0xffffffff, v, offset);
      v = is_max ? fmaxf(v, other) : v + other;
    }
    if (lane == 0) scratch[0] = v;
  }
  __syncthreads();
  v = scratch[0];
  __syncthreads();  // scratch is reused by the next reduction
  return v;
}

template <typename T, int VEC> struct alignas(sizeof(T) * VEC) Pack { T v[VEC]; };

template <typename TI, typename TO, int ITEMS, int VEC, int THREADS>
__global__ void __launch_bounds__(THREADS, 2) row_softmax_kernel(
    const TI* __restrict__ x, TO* __restrict__ y, int64_t cols, int64_t chunk, float scale, bool log_out) {
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
      for (int j = 0; j < VEC; ++j) v[k * VEC + j] = -INFINITY;
    }
  }
  #pragma unroll
  for (int k = 0; k < ITEMS; ++k) m = fmaxf(m, v[k]);
  m = block_reduce<THREADS>(m, scratch, true);
  float s = 0.0f;
  #pragma unroll
  for (int k = 0; k < ITEMS; ++k) s += v[k] == -INFINITY ? 0.0f : expf(v[k] - m);  // NaN stays NaN
  s = block_reduce<THREADS>(s, scratch, false);
  if (threadIdx.x == 0) { part[0] = m; part[1] = s; }
  cluster.sync();
  float M = -INFINITY;
  for (unsigned r = 0; r < blocks; ++r) M = fmaxf(M, cluster.map_shared_rank(part, r)[0]);
  float S = 0.0f;
  for (unsigned r = 0; r < blocks; ++r) {
    const float* p = cluster.map_shared_rank(part, r);
    S += p[1] == 0.0f ? 0.0f : p[1] * expf(p[0] - M);
  }
  cluster.sync();  // every block has read the others' parts: each may now exit
  const float shift = M + logf(S), inv = 1.0f / S;
  #pragma unroll
  for (int k = 0; k < PACKS; ++k) {
    const int64_t i = start + ((int64_t)k * THREADS + threadIdx.x) * VEC;
    if (i < end) {
      Pack<TO, VEC> p;
      #pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const float e = v[k * VEC + j];
        p.v[j] = from_float<TO>(log_out ? e - shift : expf(e - M) * inv);
      }
      *reinterpret_cast<Pack<TO, VEC>*>(yr + i) = p;
    }
  }
}

template <typename TI, typename TO, int VEC>
void launch_typed(const torch::Tensor& x, torch::Tensor& y, int64_t rows, int64_t cols, int64_t clusters,
                  int64_t chunk, float scale, bool log_out) {
  constexpr int THREADS = 512;
  auto kernel = row_softmax_kernel<TI, TO, 32, VEC, THREADS>;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3((unsigned)(rows * clusters));
  config.blockDim = dim3(THREADS);
  config.dynamicSmemBytes = 0;
  config.stream = at::cuda::getCurrentCUDAStream();
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeClusterDimension;
  attribute[0].val.clusterDim.x = (unsigned)clusters;
  attribute[0].val.clusterDim.y = 1;
  attribute[0].val.clusterDim.z = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  cudaError_t err = cudaLaunchKernelEx(&config, kernel, (const TI*)x.data_ptr(), (TO*)y.data_ptr(), cols, chunk,
                                       scale, log_out);
  TORCH_CHECK(err == cudaSuccess, "row_softmax launch: ", cudaGetErrorString(err));
}

template <typename TI, typename TO>
void launch_vec(const torch::Tensor& x, torch::Tensor& y, int64_t rows, int64_t cols, int64_t clusters,
                bool vectorized, float scale, bool log_out) {
  // 16 bytes a load where every row and every block's part start on a 16-byte boundary (on the H200 a
  // bfloat16 input's 32-byte float32 packs out ran slower than single floats)
  constexpr int VEC = 16 / sizeof(TI);
  const bool aligned = vectorized && cols % VEC == 0 && reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(y.data_ptr()) % 16 == 0 && sizeof(TO) == sizeof(TI);
  int64_t chunk = (cols + clusters - 1) / clusters;
  if (aligned) {
    chunk = (chunk + VEC - 1) / VEC * VEC;
    launch_typed<TI, TO, VEC>(x, y, rows, cols, clusters, chunk, scale, log_out);
  } else {
    launch_typed<TI, TO, 1>(x, y, rows, cols, clusters, chunk, scale, log_out);
  }
}

void launch(torch::Tensor x, torch::Tensor y, int64_t clusters, bool vectorized, double scale, bool log_out) {
  // one input and output type a build: the op builds what a graph's dtypes ask, each in seconds
  TORCH_CHECK(x.scalar_type() == torch::kFloat && y.scalar_type() == torch::kFloat, "row_softmax: built for ",
              torch::kFloat, " to ", torch::kFloat, ", given ", x.scalar_type(), " to ", y.scalar_type());
  const int64_t cols = x.size(-1);
  launch_vec<float, float>(x, y, x.numel() / cols, cols, clusters, vectorized, (float)scale, log_out);
}
