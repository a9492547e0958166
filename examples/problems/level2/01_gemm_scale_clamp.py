import torch
import torch.nn as nn


class Model(nn.Module):
    """nn.Linear, then multiply by a scalar and clamp to a range.

    A GEMM with a purely element-wise epilogue: Inductor leaves the GEMM to
    cuBLAS (``addmm``) and fuses scale + clamp into one Triton kernel.
    """

    def __init__(self, in_features: int, out_features: int, scale: float, clamp_min: float, clamp_max: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x) * self.scale
        return torch.clamp(y, min=self.clamp_min, max=self.clamp_max)


batch_size = 8192
in_features = 4096
out_features = 4096
scale = 2.5
clamp_min = -1.0
clamp_max = 1.0

SMALL_SIZES = {"batch_size": 16, "in_features": 64, "out_features": 48}


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale, clamp_min, clamp_max]
