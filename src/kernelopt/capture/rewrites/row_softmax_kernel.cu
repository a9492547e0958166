// kernelopt's row softmax and row L2 normalisation kernels (kernelopt.capture.rewrites.row_softmax_kernel,
// which describes them), built after cluster_prelude.cuh. That module fills in the placeholders (capitals
// between double underscores): threads, items and blocks an SM, the NaN-keeping max, dtypes, the bulk form's build.

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

template <int THREADS, bool NORM>
static cudaError_t launch_bulk(const void* x, void* y, int64_t rows, int64_t cols, int64_t clusters, float scale,
                               bool log_out, bool lse, float eps, cudaStream_t stream, int* active) {
  constexpr auto kernel =
      row_softmax_bulk<__IN__, __OUT__, THREADS, NORM, __BULK_PIECES__, __BULK_FAST_EXP__, __BULK_STREAMING__>;
  const int64_t chunk = (cols + clusters - 1) / clusters;
  const size_t smem = (size_t)chunk * sizeof(__IN__) + 16;
  const cudaError_t err = allow<kernel>(smem, clusters);  // clusters of 8 at most: portable sizes alone
  if (err != cudaSuccess) return err;
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
