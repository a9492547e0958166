import torch
import torch.nn as nn


class Model(nn.Module):
    """nn.AvgPool1d, window 8, stride 4, padding 2, over long sequences.

    Overlapping 1-D windows along the contiguous axis; zero padding is counted in
    the average (the torch default ``count_include_pad=True``).
    """

    def __init__(self, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.pool = nn.AvgPool1d(kernel_size=kernel_size, stride=stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


batch_size = 64
channels = 128
length = 65536
kernel_size = 8
stride = 4
padding = 2

SMALL_SIZES = {"batch_size": 2, "channels": 4, "length": 256}


def get_inputs():
    return [torch.randn(batch_size, channels, length)]


def get_init_inputs():
    return [kernel_size, stride, padding]
