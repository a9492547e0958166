import torch
import torch.nn as nn


class Model(nn.Module):
    """Max over the middle dimension of a 3-D tensor (a strided, outer reduction).

    The reduced axis is not contiguous: each output element reads ``dim1`` values
    ``dim2`` floats apart, so coalescing depends on how threads map to ``dim2``.
    """

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.max(x, dim=self.dim).values


batch_size = 64
dim1 = 8192
dim2 = 1024
reduce_dim = 1

SMALL_SIZES = {"batch_size": 2, "dim1": 64, "dim2": 32}


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return [reduce_dim]
