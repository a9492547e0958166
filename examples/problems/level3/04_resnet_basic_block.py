import torch
import torch.nn as nn


class Model(nn.Module):
    """A ResNet basic block: conv3x3-BN-ReLU-conv3x3-BN, identity shortcut, ReLU.

    Two cuDNN convolutions; eval-mode BatchNorms (with randomised statistics),
    the residual add and the ReLUs are the element-wise work around them.
    """

    def __init__(self, channels: int):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        with torch.no_grad():
            for bn in (self.bn1, self.bn2):
                bn.running_mean.uniform_(-0.2, 0.2)
                bn.running_var.uniform_(0.5, 2.0)
                bn.weight.uniform_(0.5, 1.5)
                bn.bias.uniform_(-0.2, 0.2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + x)


batch_size = 32
channels = 64
height = 128
width = 128

SMALL_SIZES = {"batch_size": 2, "channels": 4, "height": 8, "width": 8}


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels]
