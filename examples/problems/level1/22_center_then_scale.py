import torch
import torch.nn as nn


class Model(nn.Module):
    """Center each column, then scale each row by its root mean square.

    A chain of small element-wise steps around two reductions along different
    axes: the column means must be complete before any row can be scaled, so
    the compiler cannot fuse the chain into one pass and the intermediate makes
    a round trip through memory.
    """

    def __init__(self, eps: float = 1e-6):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        centered = x - x.mean(dim=0, keepdim=True)
        scale = torch.rsqrt(centered.pow(2).mean(dim=1, keepdim=True) + self.eps)
        return centered * scale * 0.5 + 0.25


batch_size = 16384
dim = 8192

SMALL_SIZES = {"batch_size": 32, "dim": 64}


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
