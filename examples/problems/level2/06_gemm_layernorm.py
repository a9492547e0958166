import torch
import torch.nn as nn


class Model(nn.Module):
    """nn.Linear followed by nn.LayerNorm over the output features.

    Per-row mean and variance of the GEMM output, then an affine: a reduction
    epilogue of the kind transformer blocks are full of.
    """

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.norm = nn.LayerNorm(out_features)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.linear(x))


batch_size = 8192
in_features = 4096
out_features = 4096

SMALL_SIZES = {"batch_size": 16, "in_features": 64, "out_features": 64}


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
