import torch
import torch.nn as nn


class Model(nn.Module):
    """nn.Linear followed by a softmax over each output row (8192 wide).

    A reduction epilogue: the softmax needs whole rows of the GEMM output, so it
    cannot be fused into a tile-wise GEMM epilogue without a cross-tile pass.
    """

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.linear(x), dim=1)


batch_size = 8192
in_features = 2048
out_features = 8192

SMALL_SIZES = {"batch_size": 16, "in_features": 32, "out_features": 128}


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
