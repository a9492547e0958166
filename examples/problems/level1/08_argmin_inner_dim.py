import torch
import torch.nn as nn


class Model(nn.Module):
    """Argmin over the innermost dimension; returns int64 indices.

    An index-carrying reduction: a kernel must track value and position together
    and break ties towards the first occurrence, as torch does.
    """

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.argmin(x, dim=self.dim)


batch_size = 128
dim1 = 4096
dim2 = 1000
reduce_dim = 2

SMALL_SIZES = {"batch_size": 2, "dim1": 32, "dim2": 100}


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return [reduce_dim]
