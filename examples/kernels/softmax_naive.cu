// kernelopt: cuda
// A hand-written CUDA C++ row softmax in the slot of softmax_kernel of examples/kernels/softmax_naive.py:
//   kernelopt verify examples/kernels/softmax_naive.py --candidate examples/kernels/softmax_naive.cu
// The file's own launch() still allocates y and calls softmax_kernel[(n_rows,)](x, y, n_cols, x_stride,
// y_stride, BLOCK=..., num_warps=4); kernelopt drops the grid, BLOCK and num_warps and calls launch()
// below with the kernel's runtime parameters in order.
//
// The Triton kernel holds a whole row of 32768 floats in four warps' registers, 256 values a thread,
// and spills. Here a row of up to 32768 floats (its start and length multiples of four) is read once
// into 1024 threads' registers, 8 float4 each (48 registers, no spill on sm_90): a block maximum, then
// exp(x - max) kept in place, a block sum, and the products with 1/sum written with a streaming store.
// exp is __expf, ex2.approx(x * log2 e): the instruction Triton's own tl.exp emits for float32, so the
// original's rounding is matched, not loosened.
// Any other row (longer, or not float4-aligned) takes two passes: the first keeps a running maximum
// and a sum rescaled to it (online softmax: one read), the second reads the row again and writes
// exp(x - max) / sum. Reductions go through warp shuffles, then one shared slot per warp.
//
// NaN and infinities behave as in the original: a NaN in a row makes the row NaN, +inf makes it
// NaN (inf - inf), a row of -inf is NaN (x - max is NaN), and -inf beside finite values gives 0.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cstdint>
#include <cmath>

constexpr int THREADS = 1024;
constexpr int WARPS = THREADS / 32;

struct MaxSum {
  float max;  // the largest value seen (never NaN: comparisons with NaN are false)
  float sum;  // sum of exp(v - max) over the values seen (NaN once a NaN was seen)
};

__device__ __forceinline__ void add_value(MaxSum& acc, float v) {
  if (v == -INFINITY) {
    return;  // exp(-inf - max) is 0 when the row has a larger value; a row of -inf is NaN at the end anyway
  }
  if (v > acc.max) {
    acc.sum = acc.sum * expf(acc.max - v) + 1.0f;
    acc.max = v;
  } else {
    acc.sum += expf(v - acc.max);  // a NaN v makes the sum NaN, +inf beside +inf too (inf - inf)
  }
}

__device__ __forceinline__ float rescaled(const MaxSum& part, float to) {
  return part.sum == 0.0f ? 0.0f : part.sum * expf(part.max - to);  // 0 * exp(NaN) would invent a NaN
}

__device__ __forceinline__ MaxSum merge(const MaxSum& a, const MaxSum& b) {
  const float to = a.max > b.max ? a.max : b.max;
  return MaxSum{to, rescaled(a, to) + rescaled(b, to)};
}

__device__ __forceinline__ MaxSum warp_merge(MaxSum acc) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    MaxSum other;
    other.max = __shfl_xor_sync(0xffffffffu, acc.max, offset);
    other.sum = __shfl_xor_sync(0xffffffffu, acc.sum, offset);
    acc = merge(acc, other);
  }
  return acc;
}

constexpr int REG_THREADS = 1024;
constexpr int REG_VEC = 8;  // float4 per thread: rows of up to 1024 * 8 * 4 = 32768 floats
constexpr int64_t REG_MAX_COLS = static_cast<int64_t>(REG_THREADS) * REG_VEC * 4;

__device__ __forceinline__ const float* row_of(const float* base, int64_t stride) {
  return base + static_cast<int64_t>(blockIdx.x) * stride;  // one block per row
}

__device__ __forceinline__ float* row_of(float* base, int64_t stride) {
  return base + static_cast<int64_t>(blockIdx.x) * stride;
}

// A block-wide maximum (is_max) or sum of one value per thread; every thread gets the result.
__device__ __forceinline__ float block_reduce(float v, float* slots, bool is_max) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float o = __shfl_xor_sync(0xffffffffu, v, offset);
    v = is_max ? fmaxf(v, o) : v + o;
  }
  if (lane == 0) {
    slots[warp] = v;
  }
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x >> 5) ? slots[lane] : (is_max ? -INFINITY : 0.0f);
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float o = __shfl_xor_sync(0xffffffffu, v, offset);
    v = is_max ? fmaxf(v, o) : v + o;
  }
  __syncthreads();  // the slots are written again by the next reduction
  return v;
}

// The row in registers: read once, written once. fmaxf skips a NaN, but exp(NaN - max) is NaN and the
// sum with it, so such a row is NaN as in the original.
__global__ void __launch_bounds__(REG_THREADS, 1)
row_softmax_in_registers(const float* __restrict__ x, float* __restrict__ y, int64_t n_cols, int64_t x_stride,
                         int64_t y_stride) {
  __shared__ float slots[REG_THREADS / 32];
  const float4* x4 = reinterpret_cast<const float4*>(row_of(x, x_stride));
  float4* y4 = reinterpret_cast<float4*>(row_of(y, y_stride));
  const int n4 = static_cast<int>(n_cols / 4);
  float4 v[REG_VEC];
#pragma unroll
  for (int i = 0; i < REG_VEC; ++i) {
    const int c = threadIdx.x + i * REG_THREADS;
    v[i] = c < n4 ? __ldcs(x4 + c) : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
  }
  float row_max = -INFINITY;
#pragma unroll
  for (int i = 0; i < REG_VEC; ++i) {
    row_max = fmaxf(fmaxf(row_max, fmaxf(v[i].x, v[i].y)), fmaxf(v[i].z, v[i].w));
  }
  row_max = block_reduce(row_max, slots, true);
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < REG_VEC; ++i) {
    if (threadIdx.x + i * REG_THREADS < n4) {
      v[i] = make_float4(__expf(v[i].x - row_max), __expf(v[i].y - row_max), __expf(v[i].z - row_max),
                         __expf(v[i].w - row_max));
      sum += (v[i].x + v[i].y) + (v[i].z + v[i].w);
    }
  }
  const float inverse = 1.0f / block_reduce(sum, slots, false);
#pragma unroll
  for (int i = 0; i < REG_VEC; ++i) {
    const int c = threadIdx.x + i * REG_THREADS;
    if (c < n4) {
      __stcs(y4 + c, make_float4(v[i].x * inverse, v[i].y * inverse, v[i].z * inverse, v[i].w * inverse));
    }
  }
}

// VEC4: the row's start and length are multiples of four floats, so it is read as float4.
template <bool VEC4>
__global__ void __launch_bounds__(THREADS, 2)
row_softmax(const float* __restrict__ x, float* __restrict__ y, int64_t n_cols, int64_t x_stride, int64_t y_stride) {
  __shared__ MaxSum partial[WARPS];
  __shared__ MaxSum row_total;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const float* xr = row_of(x, x_stride);
  float* yr = row_of(y, y_stride);

  MaxSum acc{-INFINITY, 0.0f};
  if (VEC4) {
    const float4* x4 = reinterpret_cast<const float4*>(xr);
    for (int64_t c = threadIdx.x; c < n_cols / 4; c += THREADS) {
      const float4 v = x4[c];
      add_value(acc, v.x);
      add_value(acc, v.y);
      add_value(acc, v.z);
      add_value(acc, v.w);
    }
  } else {
    for (int64_t c = threadIdx.x; c < n_cols; c += THREADS) {
      add_value(acc, xr[c]);
    }
  }
  acc = warp_merge(acc);
  if (lane == 0) {
    partial[warp] = acc;
  }
  __syncthreads();
  if (warp == 0) {
    MaxSum part = partial[lane];  // WARPS == 32: one slot per lane
    part = warp_merge(part);
    if (lane == 0) {
      row_total = part;
    }
  }
  __syncthreads();
  const float row_max = row_total.max;
  const float row_sum = row_total.sum;

  if (VEC4) {
    const float4* x4 = reinterpret_cast<const float4*>(xr);
    float4* y4 = reinterpret_cast<float4*>(yr);
    for (int64_t c = threadIdx.x; c < n_cols / 4; c += THREADS) {
      const float4 v = __ldcs(x4 + c);  // the row's last read: evict it first
      float4 out;
      out.x = expf(v.x - row_max) / row_sum;
      out.y = expf(v.y - row_max) / row_sum;
      out.z = expf(v.z - row_max) / row_sum;
      out.w = expf(v.w - row_max) / row_sum;
      __stcs(y4 + c, out);
    }
  } else {
    for (int64_t c = threadIdx.x; c < n_cols; c += THREADS) {
      __stcs(yr + c, expf(__ldcs(xr + c) - row_max) / row_sum);
    }
  }
}

void launch(torch::Tensor x_ptr, torch::Tensor y_ptr, int64_t n_cols, int64_t x_stride, int64_t y_stride) {
  const int64_t rows = x_ptr.size(0);  // the Triton grid was (n_rows,): one block per row here too
  if (rows == 0 || n_cols == 0) {
    return;
  }
  const float* x = x_ptr.data_ptr<float>();
  float* y = y_ptr.data_ptr<float>();
  const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0;
  const bool vec4 = aligned && n_cols % 4 == 0 && x_stride % 4 == 0 && y_stride % 4 == 0;
  auto stream = at::cuda::getCurrentCUDAStream();
  const unsigned int grid = static_cast<unsigned int>(rows);
  if (vec4 && n_cols <= REG_MAX_COLS) {
    row_softmax_in_registers<<<grid, REG_THREADS, 0, stream>>>(x, y, n_cols, x_stride, y_stride);
  } else if (vec4) {
    row_softmax<true><<<grid, THREADS, 0, stream>>>(x, y, n_cols, x_stride, y_stride);
  } else {
    row_softmax<false><<<grid, THREADS, 0, stream>>>(x, y, n_cols, x_stride, y_stride);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
