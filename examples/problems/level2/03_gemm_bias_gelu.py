import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """``torch.matmul`` with a (in, out) weight, a bias add, then tanh-GELU.

    Written with matmul rather than nn.Linear, so the weight is not transposed
    and the bias is a separate graph op: Inductor may emit ``mm`` plus a fused
    bias + GELU kernel instead of ``addmm``.
    """

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(in_features, out_features) / in_features**0.5)
        self.bias = nn.Parameter(torch.randn(out_features) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(torch.matmul(x, self.weight) + self.bias, approximate="tanh")


batch_size = 4096
in_features = 8192
out_features = 8192

SMALL_SIZES = {"batch_size": 16, "in_features": 64, "out_features": 96}


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
