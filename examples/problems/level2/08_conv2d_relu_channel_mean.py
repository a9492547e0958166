import torch
import torch.nn as nn


class Model(nn.Module):
    """3x3 nn.Conv2d, ReLU, then the mean over the channel dimension.

    A reduction epilogue across channels: in NCHW the reduced axis is the
    outermost-but-one, so each output pixel reads a strided column.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x)).mean(dim=1, keepdim=True)


batch_size = 64
in_channels = 64
out_channels = 128
height = 128
width = 128
kernel_size = 3

SMALL_SIZES = {"batch_size": 2, "in_channels": 4, "out_channels": 8, "height": 8, "width": 8}


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
