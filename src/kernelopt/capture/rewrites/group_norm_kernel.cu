// kernelopt's group norm kernels (kernelopt.capture.rewrites.group_norm_kernel, which describes them), built
// after cluster_prelude.cuh. That module fills in the placeholders (capitals between double underscores).

// v summed over the warp, in every lane, in one order
__device__ __forceinline__ float warp_sum(float v) {
  #pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffff, v, offset);
  return v;
}

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

// What the kernel does to a normalised element of channel ch of sample n, in float32:
//   act(((x - mean) * rstd * weight[ch] + bias[ch]) * (scale[n, ch] + scale_offset) + shift[n, ch])
// each of weight, bias (by channel, contiguous), scale and shift (by sample and channel, any strides) of
// type P (float, or the input's type) or null (1, 0, 1 and 0), act the identity or SiLU: a group norm and
// the modulation a diffusion block applies after it (x * (1 + scale) + shift, then SiLU) in one kernel.
template <typename P>
struct Epilogue {
  const P* weight;
  const P* bias;
  const P* scale;
  const P* shift;
  int64_t scale_n, scale_c, shift_n, shift_c;  // strides, elements
  float scale_offset;
  int silu;
  // added to the input by channel before anything (a convolution's bias, which Inductor peels off the
  // convolution into an add of its own): the channels-last kernel's alone
  const P* in_bias;
  // channel ch of sample n: a and b of its output act((x - mean) * a + b) (not x * a + (b - mean * a), which
  // cancels where the mean is large against the spread: a constant group at 3 came out 0.25 +- 1e-4)
  __device__ __forceinline__ void coefficients(int64_t n, int64_t ch, float rstd, float& a, float& b) const {
    a = weight != nullptr ? as_float<P>(weight[ch]) : 1.0f;
    b = bias != nullptr ? as_float<P>(bias[ch]) : 0.0f;
    if (scale != nullptr) {
      const float s = as_float<P>(scale[n * scale_n + ch * scale_c]) + scale_offset;
      a *= s;
      b *= s;
    }
    if (shift != nullptr) b += as_float<P>(shift[n * shift_n + ch * shift_c]);
    a *= rstd;
  }
  // (a fast division: a full-precision one is a dozen instructions an element, in a pass that must not
  // be bound by its instructions)
  __device__ __forceinline__ float act(float h) const { return silu ? __fdividef(h, 1.0f + __expf(-h)) : h; }
};

// a / b for 0 <= a < 2^24 (exact in float) and b > 0, by the float reciprocal inv_b = 1 / b, off by one
// at most before the correction: an integer division by a number known only at run time is tens of
// instructions, and the kernels' passes would pay one at every pack (a column's channel, a pack's pixel)
__device__ __forceinline__ int quotient(int a, int b, float inv_b) {
  int q = __float2int_rz((float)a * inv_b);
  if (q * b > a) --q;
  else if ((q + 1) * b <= a) ++q;
  return q;
}

// A group's mean and rstd from each block's count n, sum s and sum of squared deviations from its own
// mean q (Chan's parallel variance): each block pushes its three into every block's parts (thread r writes
// rank r's) once every block has started (the caller's relaxed arrive at its start is waited on here), and
// after one cluster barrier reads its own shared memory alone, lane r block r's, so that no block waits on
// another's reads before it may exit. The same sums in the same order in every block: the same mean.
__device__ __forceinline__ void cluster_moments(cg::cluster_group& cluster, float* parts, float n, float s, float q,
                                                float cols, float eps, float& mean, float& rstd) {
  const unsigned rank = cluster.block_rank(), blocks = cluster.num_blocks();
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
  if (threadIdx.x < blocks) {
    float* to = cluster.map_shared_rank(parts, threadIdx.x) + 3 * rank;
    to[0] = n;
    to[1] = s;
    to[2] = q;
  }
  cluster.sync();
  const int lane = threadIdx.x % 32;
  const float pn = lane < (int)blocks ? parts[3 * lane] : 0.0f;
  const float ps = lane < (int)blocks ? parts[3 * lane + 1] : 0.0f;
  const float pq = lane < (int)blocks ? parts[3 * lane + 2] : 0.0f;
  mean = warp_sum(ps) / cols;
  const float d = pn > 0.0f ? ps / pn - mean : 0.0f;
  rstd = rsqrtf(warp_sum(pq + pn * d * d) / cols + eps);
}

// A thread's running count, mean and sum of squared deviations, values folded in a pack at a time by
// Chan's rule (Welford by pack: no sum of squares less a squared mean), each value taken less ref (the
// group's first, the same in every block: a running mean near a large offset rounds at its own size, its
// deviations from the first value do not; 1000 +- 0.01 came out 2.4x the eager error on the H100 without)
struct Moments {
  float count = 0.0f, mean = 0.0f, m2 = 0.0f;
  // n values of mean m and squared deviations q from it
  __device__ __forceinline__ void add(float n, float m, float q) {
    const float total = count + n, delta = m - mean;
    mean += delta * __fdividef(n, total);
    m2 += q + delta * delta * __fdividef(count * n, total);
    count = total;
  }
  template <typename T, int VEC>
  __device__ __forceinline__ void add_pack(const Pack<T, VEC>& v, float ref) {
    float pm = 0.0f, pq = 0.0f;
    #pragma unroll
    for (int j = 0; j < VEC; ++j) pm += as_float<T>(v.v[j]) - ref;
    pm *= 1.0f / VEC;
    #pragma unroll
    for (int j = 0; j < VEC; ++j) { const float d = (as_float<T>(v.v[j]) - ref) - pm; pq += d * d; }
    add((float)VEC, pm, pq);
  }
  // the block's sum s of its n values (less ref) and squared deviations q from their mean, in every thread
  template <int THREADS>
  __device__ __forceinline__ void block(float n, float* scratch, float& s, float& q) const {
    s = block_sum<THREADS>(count * mean, scratch);
    const float local_mean = n > 0.0f ? s / n : 0.0f;
    q = block_sum<THREADS>(m2 + count * (mean - local_mean) * (mean - local_mean), scratch);
  }
};

// One group (cols elements: channels_per_group channels of hw each) a cluster; row r of x is group
// r % groups of sample r / groups, its epilogue as above. REGS > 0: the
// last REGS 16-byte packs a thread of each block's part are held in registers, the rest in shared memory
// (the host launches that form only where rows and parts are whole packs from 16-byte boundaries), so that
// a part of 128 KB leaves room for two blocks an SM. ONE_PASS (REGS 0 alone): the part's moments folded
// by pack as it lands (Moments), no second pass over shared memory before the cluster's exchange.
template <typename T, typename P, int THREADS, int PIECES, int REGS, bool ONE_PASS>
// five blocks an SM for parts in shared memory alone (48 registers: level2/13's parts of 40 KB fit five in
// shared memory, and the epilogue's 55 registers had cut that to four, 2.37 to 2.15 TB/s on the H100;
// wider parts are held to fewer by shared memory), two for the form that holds some in registers
__global__ void __launch_bounds__(THREADS, REGS > 0 ? 2 : 5) group_norm_bulk(
    const T* __restrict__ x, T* __restrict__ y, const Epilogue<P> e, int64_t cols, int64_t chunk, int hw,
    int64_t channels_per_group, int64_t groups, float eps) {
  static_assert(!ONE_PASS || REGS == 0, "the one-pass form holds its part in shared memory alone");
  constexpr int VEC = 16 / sizeof(T);
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ __align__(8) unsigned long long bars[PIECES];
  __shared__ float scratch[32];
  __shared__ float parts[3 * __MAX_CLUSTER__];  // every block's count, sum and sum of squared deviations, by rank
  cg::cluster_group cluster = cg::this_cluster();
  // arrived at once, waited on before the first write into another block's shared memory: every block of
  // the cluster has started by then
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  const unsigned rank = cluster.block_rank();
  const unsigned blocks = cluster.num_blocks();
  const int64_t row = blockIdx.x / blocks;
  const int64_t start = min((int64_t)rank * chunk, cols);
  const int n = (int)(min(start + chunk, cols) - start);
  const T* src = x + row * cols + start;
  T* dst = y + row * cols + start;
  const int held_n = REGS > 0 ? min(n, REGS * VEC * THREADS) : 0;  // elements in registers, after the rest
  const int n_smem = n - held_n;
  const BulkPart<T, PIECES> bulk(src, n_smem, smem_raw, bars);
  T* buf = bulk.buf;

  // pass 1, as the part lands: its sum (the registers' packs loaded while the bulk copies fly), or in the
  // one-pass form its moments less ref (0 in the others: (v - 0) is v)
  const float ref = ONE_PASS ? as_float<T>(x[row * cols]) : 0.0f;
  Moments m;
  float s = 0.0f;
  float held[REGS > 0 ? REGS * VEC : 1];
  if constexpr (REGS > 0) {
    const Pack<T, VEC>* from = reinterpret_cast<const Pack<T, VEC>*>(src + n_smem);
    #pragma unroll
    for (int k = 0; k < REGS; ++k) {
      const int i = k * THREADS + threadIdx.x;
      const bool in = i * VEC < held_n;
      Pack<T, VEC> v;
      if (in) v = from[i];
      #pragma unroll
      for (int j = 0; j < VEC; ++j) {
        held[k * VEC + j] = in ? as_float<T>(v.v[j]) : 0.0f;
        s += held[k * VEC + j];
      }
    }
  }
  auto edge = [&](int from, int to) {
    for (int i = from + threadIdx.x; i < to; i += THREADS) {
      const T v = src[i];
      buf[i] = v;
      if constexpr (ONE_PASS) m.add(1.0f, as_float<T>(v) - ref, 0.0f);
      else s += as_float<T>(v);
    }
  };
  edge(0, bulk.head);
  edge(bulk.tail, n_smem);
  for (int p = 0; p < PIECES; ++p) {
    bulk.wait(bars, p);
    for (int i = bulk.first(p) + threadIdx.x; i < bulk.last(p); i += THREADS) {
      const Pack<T, VEC> v = bulk.middle[i];
      if constexpr (ONE_PASS) {
        m.add_pack<T, VEC>(v, ref);
      } else {
        #pragma unroll
        for (int j = 0; j < VEC; ++j) s += as_float<T>(v.v[j]);
      }
    }
  }
  float q = 0.0f;
  if constexpr (ONE_PASS) {
    m.block<THREADS>((float)n, scratch, s, q);  // its __syncthreads also publish the head and tail
  } else {
    s = block_sum<THREADS>(s, scratch);  // its __syncthreads also publishes the head and tail
    const float local_mean = n > 0 ? s / (float)n : 0.0f;
    // pass 2, over shared memory: the squared deviations from the part's own mean
    for (int i = threadIdx.x; i < bulk.head; i += THREADS) { const float d = as_float<T>(buf[i]) - local_mean; q += d * d; }
    for (int i = bulk.tail + threadIdx.x; i < n_smem; i += THREADS) { const float d = as_float<T>(buf[i]) - local_mean; q += d * d; }
    for (int i = threadIdx.x; i < bulk.vectors; i += THREADS) {
      const Pack<T, VEC> v = bulk.middle[i];
      #pragma unroll
      for (int j = 0; j < VEC; ++j) { const float d = as_float<T>(v.v[j]) - local_mean; q += d * d; }
    }
    if constexpr (REGS > 0) {
      #pragma unroll
      for (int k = 0; k < REGS; ++k) {
        const bool in = (k * THREADS + (int)threadIdx.x) * VEC < held_n;
        #pragma unroll
        for (int j = 0; j < VEC; ++j) { const float d = held[k * VEC + j] - local_mean; q += in ? d * d : 0.0f; }
      }
    }
    q = block_sum<THREADS>(q, scratch);
  }
  float mean, rstd;  // mean: less ref
  cluster_moments(cluster, parts, (float)n, s, q, (float)cols, eps, mean, rstd);
  const int64_t channel0 = (row % groups) * channels_per_group;
  const int64_t sample = row / groups;
  auto scale_shift = [&](int c, float& a, float& b) { e.coefficients(sample, channel0 + c, rstd, a, b); };
  // a thread's packs run through the channels in order: each channel's coefficients computed once a thread
  // (four loads and their arithmetic, not at every pack)
  int cached = -1;
  float cached_a = 0.0f, cached_b = 0.0f;
  auto coefficients_of = [&](int c, float& a, float& b) {
    if (c != cached) {
      scale_shift(c, cached_a, cached_b);
      cached = c;
    }
    a = cached_a;
    b = cached_b;
  };
  const float inv_hw = 1.0f / (float)hw;
  auto out_of = [&](float v, float a, float b) { return from_float<T>(e.act(((v - ref) - mean) * a + b)); };
  // columns of a group fit an int (the op's widest group is 532352 elements): 32-bit division by hw
  const int first = (int)start;
  auto edge_out = [&](int from, int to) {
    for (int i = from + threadIdx.x; i < to; i += THREADS) {
      float a, b;
      scale_shift((first + i) / hw, a, b);
      dst[i] = out_of(as_float<T>(buf[i]), a, b);
    }
  };
  edge_out(0, bulk.head);
  edge_out(bulk.tail, n_smem);
  // the middle 16 bytes a store where the output is aligned as the input (element by element where an
  // input with a storage offset is not); hw >= VEC (the caller's check), so a pack spans at most two channels
  // the pack of VEC values t starting at column col of the group, normalised into out
  auto pack_out = [&](const Pack<float, VEC> t, int col, T* out, bool aligned) {
    const int c = quotient(col, hw, inv_hw);
    const int next = (c + 1) * hw - col;  // elements of the pack in channel c
    float a0, b0, a1 = 0.0f, b1 = 0.0f;
    coefficients_of(c, a0, b0);
    if (next < VEC) scale_shift(c + 1, a1, b1);
    Pack<T, VEC> o;
    #pragma unroll
    for (int j = 0; j < VEC; ++j) o.v[j] = out_of(t.v[j], j < next ? a0 : a1, j < next ? b0 : b1);
    if (aligned) {
      store16<T>(out, o.v, true);
    } else {
      #pragma unroll
      for (int j = 0; j < VEC; ++j) out[j] = o.v[j];
    }
  };
  T* ymid = dst + bulk.head;
  const bool aligned = (reinterpret_cast<uintptr_t>(ymid) & 15u) == 0;
  for (int i = threadIdx.x; i < bulk.vectors; i += THREADS) {
    const Pack<T, VEC> v = bulk.middle[i];
    Pack<float, VEC> t;
    #pragma unroll
    for (int j = 0; j < VEC; ++j) t.v[j] = as_float<T>(v.v[j]);
    pack_out(t, first + bulk.head + i * VEC, ymid + (int64_t)i * VEC, aligned);
  }
  if constexpr (REGS > 0) {
    #pragma unroll
    for (int k = 0; k < REGS; ++k) {
      const int i = k * THREADS + threadIdx.x;
      Pack<float, VEC> t;
      #pragma unroll
      for (int j = 0; j < VEC; ++j) t.v[j] = held[k * VEC + j];
      if (i * VEC < held_n)
        pack_out(t, first + n_smem + i * VEC, dst + n_smem + (int64_t)i * VEC, true);
    }
  }
}

// The 16-byte slot of pack k of pixel p in a part of ppp packs a pixel: swizzled where ppp is a power of
// two, so that eight consecutive pixels' pack k lie in eight distinct 16-byte bank groups and the output
// pass's quarter-warps (eight lanes, eight pixels) read them without conflict; an odd ppp is conflict-free
// unswizzled (mask 0), an even one that is no power of two reads two-way.
__device__ __forceinline__ int slot_of(int p, int k, int ppp, int shift, int mask) {
  return p * ppp + (k ^ ((p >> shift) & mask));
}

// The same group norm and epilogue of a channels-last input (N, H, W, C in memory: a group is cpg
// contiguous channels at every pixel, channels apart from one pixel to the next) into a contiguous output
// (N, C, H, W), the layout the traced graph gives the op where Inductor lays a convolution's output out
// channels-last (level2/09). One group a cluster, each block a run of `chunk` pixels: each thread copies
// its own 16-byte packs (cpg / VEC a pixel) into shared memory by asynchronous copies (cp.async, two commit
// groups) and sums them as they land, then their squared deviations; the output pass reads the part
// transposed, a warp's lanes consecutive pixels of one pack, so that each of its stores writes 32
// consecutive pixels of one channel. The host launches it only where cpg is whole packs and x is 16-byte
// aligned.
template <typename T, typename P, int THREADS>
__global__ void __launch_bounds__(THREADS, 3) group_norm_channels_last(
    const T* __restrict__ x, T* __restrict__ y, const Epilogue<P> e, int hw, int channels, int cpg, int groups,
    int chunk, float eps) {
  constexpr int VEC = 16 / sizeof(T);
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ float scratch[32];
  __shared__ float parts[3 * __MAX_CLUSTER__];
  cg::cluster_group cluster = cg::this_cluster();
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");  // waited on in cluster_moments
  const int rank = (int)cluster.block_rank();
  const int64_t row = blockIdx.x / cluster.num_blocks();
  const int64_t sample = row / groups;
  const int group = (int)(row % groups);
  const int p0 = min(rank * chunk, hw);
  const int pixels = min(p0 + chunk, hw) - p0;
  const int ppp = cpg / VEC;
  const int packs = pixels * ppp;
  const int mask = (ppp & (ppp - 1)) ? 0 : min(8, ppp) - 1;
  const int shift = max(0, 4 - __ffs(ppp));  // log2(8 / ppp) where ppp < 8
  const float inv_ppp = 1.0f / (float)ppp, inv_pixels = 1.0f / (float)max(pixels, 1);
  Pack<T, VEC>* buf = reinterpret_cast<Pack<T, VEC>*>(smem_raw);
  float* coef = reinterpret_cast<float*>(smem_raw + (size_t)chunk * cpg * sizeof(T));  // a, b by channel
  float* in_bias = coef + 2 * cpg;  // the input's bias by channel (16-byte aligned: cpg is whole packs)
  const T* src = x + (sample * hw + p0) * (int64_t)channels + (int64_t)group * cpg;

  // pass 1: each thread's packs i = threadIdx.x + j * THREADS, copied in two commit groups, summed as each lands
  const int rounds = (packs + THREADS - 1) / THREADS, half = (rounds + 1) / 2;
  auto copy = [&](int j0, int j1) {
    for (int j = j0; j < j1; ++j) {
      const int i = j * THREADS + threadIdx.x;
      if (i < packs) {
        const int p = quotient(i, ppp, inv_ppp), k = i - p * ppp;
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr(buf + slot_of(p, k, ppp, shift, mask))),
                     "l"(src + (int64_t)p * channels + k * VEC) : "memory");
      }
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  };
  copy(0, half);
  copy(half, rounds);
  // the input's bias, read while the copies fly: in shared memory for the passes below, and its sum over
  // the block's part added to the part's sum (each pixel has every channel of the group)
  const bool biased = e.in_bias != nullptr;
  float s = 0.0f;
  if (biased) {
    for (int c = threadIdx.x; c < cpg; c += THREADS) {
      in_bias[c] = as_float<P>(e.in_bias[(int64_t)group * cpg + c]);
      s += in_bias[c] * (float)pixels;
    }
  }
  // the bias of pack k's channels (zero where there is none)
  auto bias_of = [&](int k, float (&b)[VEC]) {
    #pragma unroll
    for (int t = 0; t < VEC; t += 4) {
      const float4 f = biased ? reinterpret_cast<const float4*>(in_bias + k * VEC)[t / 4] : make_float4(0.f, 0.f, 0.f, 0.f);
      b[t] = f.x;
      b[t + 1] = f.y;
      b[t + 2] = f.z;
      b[t + 3] = f.w;
    }
  };
  auto sum = [&](int j0, int j1) {
    for (int j = j0; j < j1; ++j) {
      const int i = j * THREADS + threadIdx.x;
      if (i < packs) {
        const int p = quotient(i, ppp, inv_ppp), k = i - p * ppp;
        const Pack<T, VEC> v = buf[slot_of(p, k, ppp, shift, mask)];
        #pragma unroll
        for (int t = 0; t < VEC; ++t) s += as_float<T>(v.v[t]);
      }
    }
  };
  asm volatile("cp.async.wait_group 1;" ::: "memory");  // a thread's own copies are visible to it alone
  sum(0, half);
  asm volatile("cp.async.wait_group 0;" ::: "memory");
  sum(half, rounds);
  s = block_sum<THREADS>(s, scratch);  // its __syncthreads also publishes every thread's copies and the bias
  const int n = pixels * cpg;
  const float local_mean = n > 0 ? s / (float)n : 0.0f;
  // pass 2, over shared memory: the squared deviations from the part's own mean
  float q = 0.0f;
  for (int i = threadIdx.x; i < packs; i += THREADS) {
    const int p = quotient(i, ppp, inv_ppp), k = i - p * ppp;
    const Pack<T, VEC> v = buf[slot_of(p, k, ppp, shift, mask)];
    float b[VEC];
    bias_of(k, b);
    #pragma unroll
    for (int t = 0; t < VEC; ++t) { const float d = (as_float<T>(v.v[t]) + b[t]) - local_mean; q += d * d; }
  }
  q = block_sum<THREADS>(q, scratch);
  float mean, rstd;
  cluster_moments(cluster, parts, (float)n, s, q, (float)hw * (float)cpg, eps, mean, rstd);
  for (int c = threadIdx.x; c < cpg; c += THREADS)
    e.coefficients(sample, (int64_t)group * cpg + c, rstd, coef[2 * c], coef[2 * c + 1]);
  __syncthreads();
  // the output, transposed: task t is pack k = t / pixels of pixel p = t % pixels
  T* dst = y + (sample * channels + (int64_t)group * cpg) * hw + p0;
  for (int t = threadIdx.x; t < packs; t += THREADS) {
    const int k = quotient(t, pixels, inv_pixels), p = t - k * pixels;
    const Pack<T, VEC> v = buf[slot_of(p, k, ppp, shift, mask)];
    float b[VEC];
    bias_of(k, b);
    #pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const int c = k * VEC + j;
      const float h = ((as_float<T>(v.v[j]) + b[j]) - mean) * coef[2 * c] + coef[2 * c + 1];
      dst[(int64_t)c * hw + p] = from_float<T>(e.act(h));
    }
  }
}

// A 16-byte load whose line L2 keeps before others (createpolicy evict_last): the reread form's first read,
// which its second wants from L2
template <typename T, int VEC>
__device__ __forceinline__ Pack<T, VEC> load_kept(const Pack<T, VEC>* p, uint64_t policy) {
  uint4 r;
  asm volatile("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p), "l"(policy));
  Pack<T, VEC> v;
  *reinterpret_cast<uint4*>(&v) = r;
  return v;
}

// Groups wider than a cluster holds in shared memory (level1/16: 8 channels x 256 x 256 float32, 2 MB)
// read twice, the second time from L2: each block reads its part of the group (whole 16-byte packs, UNROLL
// loads a thread in flight) with its lines marked to stay in L2, each thread keeping its packs' count,
// mean and squared deviations (Welford by pack: no sum of squares less a squared mean), the block and then
// the cluster combine them (Chan) at one cluster barrier, and the block reads its part again (streaming:
// from L2 where it stayed) and writes the output. in_flight clusters loop over the groups, so that only
// in_flight groups are read at once: the host sizes that to L2, so that memory sees one read and one write.
template <typename T, typename P, int THREADS, int UNROLL>
__global__ void __launch_bounds__(THREADS, 2) group_norm_reread(
    const T* __restrict__ x, T* __restrict__ y, const Epilogue<P> e, int64_t rows, int64_t cols, int64_t chunk,
    int hw, int64_t channels_per_group, int64_t groups, float eps) {
  constexpr int VEC = 16 / sizeof(T);
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ float scratch[32];
  __shared__ float parts[3 * __MAX_CLUSTER__];
  float* coef = reinterpret_cast<float*>(smem_raw);  // a, b by channel of the group
  cg::cluster_group cluster = cg::this_cluster();
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");  // waited on in cluster_moments
  const unsigned rank = cluster.block_rank(), blocks = cluster.num_blocks();
  const int64_t in_flight = gridDim.x / blocks;
  const int64_t start = min((int64_t)rank * chunk, cols);  // chunk: whole packs (the host's)
  const int packs = (int)((min(start + chunk, cols) - start) / VEC);
  uint64_t keep;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(keep));
  for (int64_t row = blockIdx.x / blocks; row < rows; row += in_flight) {
    const Pack<T, VEC>* src = reinterpret_cast<const Pack<T, VEC>*>(x + row * cols + start);
    Pack<T, VEC>* dst = reinterpret_cast<Pack<T, VEC>*>(y + row * cols + start);
    const float ref = as_float<T>(x[row * cols]);  // (Moments': every value taken less the group's first)
    // pass 1, from memory: Welford by pack
    Moments m;
    for (int base = threadIdx.x; base < packs; base += UNROLL * THREADS) {
      Pack<T, VEC> v[UNROLL];
      #pragma unroll
      for (int u = 0; u < UNROLL; ++u)
        if (base + u * THREADS < packs) v[u] = load_kept<T, VEC>(src + base + u * THREADS, keep);
      #pragma unroll
      for (int u = 0; u < UNROLL; ++u)
        if (base + u * THREADS < packs) m.add_pack<T, VEC>(v[u], ref);
    }
    const float n = (float)packs * VEC;
    float s, q;
    m.block<THREADS>(n, scratch, s, q);
    float mean, rstd;  // mean: less ref
    cluster_moments(cluster, parts, n, s, q, (float)cols, eps, mean, rstd);
    if (row + in_flight < rows)  // every block has read its parts: the next group's may be written
      asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
    const int64_t channel0 = (row % groups) * channels_per_group;
    for (int c = threadIdx.x; c < channels_per_group; c += THREADS)
      e.coefficients(row / groups, channel0 + c, rstd, coef[2 * c], coef[2 * c + 1]);
    __syncthreads();
    const float inv_hw = 1.0f / (float)hw;
    // pass 2, from L2: the output (hw >= VEC, the host's check: a pack spans at most two channels)
    for (int base = threadIdx.x; base < packs; base += UNROLL * THREADS) {
      Pack<T, VEC> v[UNROLL];
      #pragma unroll
      for (int u = 0; u < UNROLL; ++u)
        if (base + u * THREADS < packs)
          *reinterpret_cast<uint4*>(&v[u]) = __ldcs(reinterpret_cast<const uint4*>(src + base + u * THREADS));
      #pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int i = base + u * THREADS;
        if (i < packs) {
          const int col = (int)start + i * VEC;
          const int c = quotient(col, hw, inv_hw);
          const int next = (c + 1) * hw - col;  // elements of the pack in channel c
          const float a0 = coef[2 * c], b0 = coef[2 * c + 1];
          const float a1 = next < VEC ? coef[2 * c + 2] : 0.0f, b1 = next < VEC ? coef[2 * c + 3] : 0.0f;
          Pack<T, VEC> o;
          #pragma unroll
          for (int j = 0; j < VEC; ++j)
            o.v[j] = from_float<T>(
                e.act(((as_float<T>(v[u].v[j]) - ref) - mean) * (j < next ? a0 : a1) + (j < next ? b0 : b1)));
          store16<T>(reinterpret_cast<T*>(dst + i), o.v, true);
        }
      }
    }
    __syncthreads();  // coef is the next group's
  }
}

template <typename P, int REGS, bool ONE_PASS>
static cudaError_t launch(const void* x, void* y, const Epilogue<P>& e, int64_t rows, int64_t cols, int64_t hw,
                          int64_t channels_per_group, int64_t groups, int64_t clusters, float eps,
                          cudaStream_t stream, int* active) {
  constexpr int VEC = 16 / sizeof(__T__);
  constexpr auto kernel = group_norm_bulk<__T__, P, __THREADS__, __PIECES__, REGS, ONE_PASS>;
  int64_t chunk = (cols + clusters - 1) / clusters;
  if (REGS > 0) {  // whole packs from 16-byte boundaries, or not this form
    if (cols % VEC || reinterpret_cast<uintptr_t>(x) % 16 || reinterpret_cast<uintptr_t>(y) % 16)
      return cudaErrorInvalidValue;
    chunk = (chunk + VEC - 1) / VEC * VEC;
  }
  const int64_t in_registers = (int64_t)REGS * VEC * __THREADS__;
  const size_t smem = (size_t)(chunk > in_registers ? chunk - in_registers : 0) * sizeof(__T__) + 16;
  cudaError_t err = allow<kernel>(smem, clusters);
  if (err != cudaSuccess) return err;
  const ClusterLaunch config(rows, clusters, __THREADS__, smem, stream);
  if (active != nullptr) return cudaOccupancyMaxActiveClusters(active, (void*)kernel, &config.config);
  return cudaLaunchKernelEx(&config.config, kernel, (const __T__*)x, (__T__*)y, e, cols, chunk, (int)hw,
                            channels_per_group, groups, eps);
}

template <typename P>
static cudaError_t launch_channels_last(const void* x, void* y, const Epilogue<P>& e, int64_t rows, int64_t hw,
                                       int64_t channels, int64_t channels_per_group, int64_t groups, int64_t clusters,
                                       float eps, cudaStream_t stream, int* active) {
  constexpr int VEC = 16 / sizeof(__T__);
  constexpr auto kernel = group_norm_channels_last<__T__, P, __THREADS__>;
  if (channels_per_group % VEC || reinterpret_cast<uintptr_t>(x) % 16) return cudaErrorInvalidValue;
  const int64_t chunk = (hw + clusters - 1) / clusters;  // pixels a block
  const size_t smem = (size_t)(chunk * channels_per_group * sizeof(__T__) + 3 * channels_per_group * sizeof(float));
  cudaError_t err = allow<kernel>(smem, clusters);
  if (err != cudaSuccess) return err;
  const ClusterLaunch config(rows, clusters, __THREADS__, smem, stream);
  if (active != nullptr) return cudaOccupancyMaxActiveClusters(active, (void*)kernel, &config.config);
  return cudaLaunchKernelEx(&config.config, kernel, (const __T__*)x, (__T__*)y, e, (int)hw, (int)channels,
                            (int)channels_per_group, (int)groups, (int)chunk, eps);
}

template <typename P>
static cudaError_t launch_reread(const void* x, void* y, const Epilogue<P>& e, int64_t rows, int64_t cols, int64_t hw,
                                 int64_t channels_per_group, int64_t groups, int64_t clusters, int64_t in_flight,
                                 float eps, cudaStream_t stream, int* active) {
  constexpr int VEC = 16 / sizeof(__T__);
  constexpr auto kernel = group_norm_reread<__T__, P, __THREADS__, __UNROLL__>;
  if (cols % VEC || reinterpret_cast<uintptr_t>(x) % 16 || reinterpret_cast<uintptr_t>(y) % 16 || in_flight < 0)
    return cudaErrorInvalidValue;
  const int64_t chunk = ((cols + clusters - 1) / clusters + VEC - 1) / VEC * VEC;  // whole packs a block
  const size_t smem = (size_t)(2 * channels_per_group * sizeof(float));
  cudaError_t err = allow<kernel>(smem, clusters);
  if (err != cudaSuccess) return err;
  const ClusterLaunch config(in_flight > 0 ? min(in_flight, rows) : rows, clusters, __THREADS__, smem, stream);
  if (active != nullptr) return cudaOccupancyMaxActiveClusters(active, (void*)kernel, &config.config);
  return cudaLaunchKernelEx(&config.config, kernel, (const __T__*)x, (__T__*)y, e, rows, cols, chunk, (int)hw,
                            channels_per_group, groups, eps);
}

template <typename P>
static cudaError_t launch_form(const void* x, void* y, const void* const* params, const int64_t* strides,
                               float scale_offset, int silu, int64_t rows, int64_t cols, int64_t hw,
                               int64_t channels_per_group, int64_t groups, int64_t clusters, int form,
                               int channels_last, int64_t in_flight, float eps, cudaStream_t stream, int* active) {
  const Epilogue<P> e{(const P*)params[0], (const P*)params[1], (const P*)params[2], (const P*)params[3],
                      strides[0], strides[1], strides[2], strides[3], scale_offset, silu, (const P*)params[4]};
  if (channels_last)
    return form != __FORM_HELD__ ? cudaErrorInvalidValue
                                 : launch_channels_last<P>(x, y, e, rows, hw, channels_per_group * groups,
                                                           channels_per_group, groups, clusters, eps, stream, active);
  if (e.in_bias != nullptr) return cudaErrorInvalidValue;  // the channels-last kernel's alone
  switch (form) {
    case __FORM_HELD__:
      return launch<P, 0, false>(x, y, e, rows, cols, hw, channels_per_group, groups, clusters, eps, stream, active);
    case __FORM_ONE_PASS__:
      return launch<P, 0, true>(x, y, e, rows, cols, hw, channels_per_group, groups, clusters, eps, stream, active);
    case __FORM_WIDE__:
      return launch<P, __REGS_WIDE__, false>(x, y, e, rows, cols, hw, channels_per_group, groups, clusters, eps,
                                             stream, active);
    case __FORM_REREAD__:
      return launch_reread<P>(x, y, e, rows, cols, hw, channels_per_group, groups, clusters, in_flight, eps, stream,
                              active);
    default:
      return cudaErrorInvalidValue;
  }
}

// rows groups of cols elements, one a cluster of `clusters` blocks, in one of the forms (FORMS' index:
// each part held in shared memory; REGS_WIDE packs a thread of it in registers; or none held, each read
// twice, in_flight clusters at once, 0 for one a group; or held, its moments in one pass); x contiguous,
// or channels-last (channels_last: N, spatial, C in memory; the held form), y contiguous;
// params: weight, bias, scale, shift and the input's bias (each may be null; the last channels-last only),
// float32 where params_float, else of the input's type; strides: scale's and shift's by sample and by
// channel. With active != NULL, how many such clusters the GPU holds at once is written there and nothing
// is launched.
extern "C" int kopt_group_norm(const void* x, void* y, const void* const* params, int params_float,
                               const int64_t* strides, float scale_offset, int silu, int64_t rows, int64_t cols,
                               int64_t hw, int64_t channels_per_group, int64_t groups, int64_t clusters, int form,
                               int channels_last, int64_t in_flight, float eps, void* stream, int* active) {
  cudaStream_t s = (cudaStream_t)stream;
  if (params_float)
    return (int)launch_form<float>(x, y, params, strides, scale_offset, silu, rows, cols, hw, channels_per_group,
                                   groups, clusters, form, channels_last, in_flight, eps, s, active);
  return (int)launch_form<__T__>(x, y, params, strides, scale_offset, silu, rows, cols, hw, channels_per_group,
                                 groups, clusters, form, channels_last, in_flight, eps, s, active);
}

extern "C" const char* kopt_error_string(int error) { return cudaGetErrorString((cudaError_t)error); }
