"""A naive row softmax in Triton: one program per row, the whole row in registers, four warps.

A standalone Triton kernel file (docs/kernel-files.md): ``kernelopt optimize`` searches its launch
configuration and, with ``--llm``, rewrites it; every candidate must match ``reference`` in float64
as closely as this kernel does. Rows of 32768 fp32 on four warps leave 256 values to each thread,
more than its registers hold. Sized for one H200 (4096 x 32768, 512 MiB in and out); at 8192
columns the same kernel already ran at 94 % of the copy roofline there.
"""

import torch
import triton
import triton.language as tl

ROWS = 4096
COLS = 32768
SMALL_SIZES = {"ROWS": 6, "COLS": 50}


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(y_ptr + row * y_stride + cols, num / tl.sum(num, axis=0), mask=mask)


def launch(x):
    y = torch.empty_like(x)
    n_rows, n_cols = x.shape
    softmax_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(n_cols), num_warps=8, num_stages=4)
    return y


def reference(x):
    return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(ROWS, COLS)]
