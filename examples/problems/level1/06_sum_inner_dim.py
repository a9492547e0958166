import torch
import torch.nn as nn


class Model(nn.Module):
    """Sum over the innermost (contiguous) dimension, keeping it as size 1.

    One output per row of a wide matrix: a persistent or split reduction choice
    for Inductor.
    """

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim, keepdim=True)


batch_size = 16384
dim = 32768
reduce_dim = 1

SMALL_SIZES = {"batch_size": 16, "dim": 256}


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [reduce_dim]
