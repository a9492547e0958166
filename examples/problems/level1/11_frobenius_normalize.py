import torch
import torch.nn as nn


class Model(nn.Module):
    """Divide a 4-D tensor by its Frobenius norm, rescaled to unit RMS.

    The norm depends on every element, so this is a two-phase problem: a
    grid-wide reduction followed by an element-wise pass over 1 GiB. The
    ``sqrt(numel)`` factor keeps outputs O(1); plain ``x / ||x||_F`` would be about
    1e-4 per element, small enough that an all-zero output passes an absolute
    tolerance.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        norm = torch.sqrt(torch.sum(x * x))
        return x * (x.numel() ** 0.5 / norm)


batch_size = 16
channels = 64
height = 512
width = 512

SMALL_SIZES = {"batch_size": 2, "channels": 4, "height": 16, "width": 16}


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return []
