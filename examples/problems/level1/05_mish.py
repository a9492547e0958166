import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Mish, ``x * tanh(softplus(x))``, followed by a hard-tanh clip.

    A tanh-family chain of transcendental ops; a correct fused kernel must keep
    softplus stable for large |x| (the ``x3`` input distribution checks that).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * torch.tanh(F.softplus(x))
        return F.hardtanh(y, min_val=-0.5, max_val=2.0)


batch_size = 128
channels = 64
length = 32768

SMALL_SIZES = {"batch_size": 2, "channels": 4, "length": 128}


def get_inputs():
    return [torch.randn(batch_size, channels, length)]


def get_init_inputs():
    return []
