import torch
import torch.nn as nn


class Model(nn.Module):
    """3x3 nn.Conv2d, nn.BatchNorm2d (eval), ReLU.

    The classic CNN stage. The convolution goes to cuDNN; BN in eval mode and
    ReLU are element-wise and can be folded or fused after it.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.bn = nn.BatchNorm2d(out_channels)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.2, 0.2)
            self.bn.running_var.uniform_(0.5, 2.0)
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.2, 0.2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)))


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
