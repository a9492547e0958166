// Register-resident row softmax: one block per row, each thread holds VEC float4 of the row.
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif

template <int THREADS>
__device__ __forceinline__ float block_reduce(float v, float* slots, bool is_max) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float o = __shfl_xor_sync(0xffffffffu, v, offset);
    v = is_max ? fmaxf(v, o) : v + o;
  }
  if (lane == 0) slots[warp] = v;
  __syncthreads();
  constexpr int WARPS = THREADS / 32;
  v = lane < WARPS ? slots[lane] : (is_max ? -INFINITY : 0.0f);
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float o = __shfl_xor_sync(0xffffffffu, v, offset);
    v = is_max ? fmaxf(v, o) : v + o;
  }
  __syncthreads();  // the slots are used again by the next reduction
  return v;
}

template <int THREADS, int VEC, bool FAST>
__global__ void __launch_bounds__(THREADS, 1)
row_softmax_regs(const float* __restrict__ x, float* __restrict__ y, long long n_cols, long long x_stride, long long y_stride) {
  __shared__ float slots[THREADS / 32];
  const float4* x4 = reinterpret_cast<const float4*>(x + static_cast<long long>(blockIdx.x) * x_stride);
  float4* y4 = reinterpret_cast<float4*>(y + static_cast<long long>(blockIdx.x) * y_stride);
  const int n4 = static_cast<int>(n_cols / 4);
  float4 v[VEC];
#pragma unroll
  for (int i = 0; i < VEC; ++i) {
    const int c = threadIdx.x + i * THREADS;
    v[i] = c < n4 ? __ldcs(x4 + c) : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
  }
  float m = -INFINITY;
#pragma unroll
  for (int i = 0; i < VEC; ++i) m = fmaxf(fmaxf(m, fmaxf(v[i].x, v[i].y)), fmaxf(v[i].z, v[i].w));
  m = block_reduce<THREADS>(m, slots, true);
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < VEC; ++i) {
    const int c = threadIdx.x + i * THREADS;
    if (c < n4) {
      v[i].x = FAST ? __expf(v[i].x - m) : expf(v[i].x - m);
      v[i].y = FAST ? __expf(v[i].y - m) : expf(v[i].y - m);
      v[i].z = FAST ? __expf(v[i].z - m) : expf(v[i].z - m);
      v[i].w = FAST ? __expf(v[i].w - m) : expf(v[i].w - m);
      s += (v[i].x + v[i].y) + (v[i].z + v[i].w);
    }
  }
  s = block_reduce<THREADS>(s, slots, false);
  const float r = 1.0f / s;
#pragma unroll
  for (int i = 0; i < VEC; ++i) {
    const int c = threadIdx.x + i * THREADS;
    if (c < n4) {
      __stcs(y4 + c, FAST ? make_float4(v[i].x * r, v[i].y * r, v[i].z * r, v[i].w * r) : make_float4(v[i].x / s, v[i].y / s, v[i].z / s, v[i].w / s));
    }
  }
}

