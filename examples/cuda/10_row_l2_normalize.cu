// kernelopt: cuda
// A hand-written CUDA C++ replacement for the Triton kernel Inductor generates for
// examples/problems/level1/10_row_l2_normalize.py (x / ||x||_2 over rows of 65535 floats):
//   kernelopt verify examples/problems/level1/10_row_l2_normalize.py \
//     --kernel triton_red_fused_div_linalg_vector_norm_0 --candidate examples/cuda/10_row_l2_normalize.cu
// Inductor's kernel reads every row twice from memory (a sum of squares, then the scaled copy).
// Here one block per SM walks the rows in turn: the 132 rows in flight (34 MB) stay in the
// H200's L2 between the two passes, so memory sees each element read once and written once.
// launch() takes the Triton kernel's runtime parameters in order (in_ptr0, out_ptr1, xnumel,
// r0_numel) and launches on the current stream, as the slot contract asks.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

constexpr int THREADS = 1024;
constexpr int WARPS = THREADS / 32;

__global__ void __launch_bounds__(THREADS)
row_l2_normalize(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t cols) {
  __shared__ float partial[WARPS];
  __shared__ float row_norm;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* xr = x + row * cols;
    float* yr = y + row * cols;
    float acc = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += THREADS) {
      const float v = xr[c];
      acc = fmaf(v, v, acc);
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
      acc += __shfl_xor_sync(0xffffffffu, acc, offset);
    }
    if (lane == 0) {
      partial[warp] = acc;
    }
    __syncthreads();
    if (warp == 0) {
      float v = lane < WARPS ? partial[lane] : 0.0f;
      for (int offset = 16; offset > 0; offset >>= 1) {
        v += __shfl_xor_sync(0xffffffffu, v, offset);
      }
      if (lane == 0) {
        row_norm = sqrtf(v);
      }
    }
    __syncthreads();
    const float norm = row_norm;
    for (int64_t c = threadIdx.x; c < cols; c += THREADS) {
      yr[c] = xr[c] / norm;
    }
    __syncthreads();  // row_norm and partial are rewritten for the next row
  }
}

void launch(torch::Tensor in_ptr0, torch::Tensor out_ptr1, int64_t xnumel, int64_t r0_numel) {
  auto stream = at::cuda::getCurrentCUDAStream();
  const int64_t blocks = xnumel < 132 ? xnumel : 132;  // one resident block per H200 SM
  row_l2_normalize<<<blocks, THREADS, 0, stream>>>(
      in_ptr0.data_ptr<float>(), out_ptr1.data_ptr<float>(), xnumel, r0_numel);
}
