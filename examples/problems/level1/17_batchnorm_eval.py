import torch
import torch.nn as nn


class Model(nn.Module):
    """nn.BatchNorm2d in eval mode: a per-channel affine from running statistics.

    Running mean/variance and the affine parameters are randomised so the op is
    not the identity. In eval mode this is element-wise with a channel broadcast.
    """

    def __init__(self, channels: int):
        super().__init__()
        self.bn = nn.BatchNorm2d(channels)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(x)


batch_size = 32
channels = 128
height = 256
width = 256

SMALL_SIZES = {"batch_size": 2, "channels": 8, "height": 8, "width": 8}


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels]
