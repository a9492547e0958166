import torch
import torch.nn as nn


class Model(nn.Module):
    """SiLU / swish written out by hand: ``x * sigmoid(x)``.

    Two ops in the graph that Inductor should fuse into one pass over memory.
    The row width is odd on purpose, so vectorised loads meet a ragged tail.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x)


batch_size = 8192
dim = 32767

SMALL_SIZES = {"batch_size": 8, "dim": 511}


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
