import torch
import torch.nn as nn


class Model(nn.Module):
    """Row-wise L2 normalisation ``x / ||x||_2`` over very wide rows.

    32768 x 65535 fp32 (8.6 GB in, 8.6 GB out). Rows too wide for one block and
    not a power of two: Inductor's reduction heuristics were measured slower than
    eager here (9.36 ms vs 8.29 ms on an H200, traffic allows about 4-6 ms).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / torch.norm(x, p=2, dim=1, keepdim=True)


batch_size = 32768
dim = 65535

SMALL_SIZES = {"batch_size": 8, "dim": 1023}


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
