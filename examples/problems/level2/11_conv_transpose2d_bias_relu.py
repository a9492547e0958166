import torch
import torch.nn as nn


class Model(nn.Module):
    """Stride-2 nn.ConvTranspose2d (2x upsampling), an extra bias, then ReLU.

    Transposed convolutions are where Inductor was measured slower than eager
    (extra layout kernels around the cuDNN call), so the Triton kernels around
    the vendor call matter here.
    """

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.deconv = nn.ConvTranspose2d(in_channels, out_channels, kernel_size=4, stride=2, padding=1)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.deconv(x) + self.bias)


batch_size = 32
in_channels = 64
out_channels = 32
height = 128
width = 128

SMALL_SIZES = {"batch_size": 2, "in_channels": 4, "out_channels": 4, "height": 8, "width": 8}


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
