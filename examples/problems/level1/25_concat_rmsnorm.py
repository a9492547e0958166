import torch
import torch.nn as nn


class Model(nn.Module):
    """Concatenate three feature blocks, then RMS-normalize each row of the result.

    The concatenation is a barrier the compiler may materialize: written once
    whole, then read again by the row reduction, where one pass could read the
    three inputs in place.
    """

    def __init__(self, dim: int = 4096, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(dim) + 0.5)
        self.eps = eps

    def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        x = torch.cat([a, b, c], dim=1)
        return x * torch.rsqrt(x.pow(2).mean(dim=1, keepdim=True) + self.eps) * self.weight


batch_size = 32768
part = 1024

SMALL_SIZES = {"batch_size": 16, "part": 16}


def get_inputs():
    return [torch.randn(batch_size, part), torch.randn(batch_size, 2 * part), torch.randn(batch_size, part)]


def get_init_inputs():
    return [4 * part]
