"""An MLP whose forward breaks into two graphs (a data-dependent Python branch between its halves).

Our own example model for issue 14's graph breaks: Dynamo compiles two graphs,
and kernelopt must capture, optimize and verify both as one model. Pure torch.
"""

import torch
from torch import nn

batch = 4096
width = 2048
SMALL_SIZES = {"batch": 8, "width": 32}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Sequential(nn.Linear(width, width), nn.GELU(), nn.LayerNorm(width))
        self.second = nn.Sequential(nn.Linear(width, width), nn.SiLU())

    def forward(self, x):
        h = self.first(x)
        # Reads a value on the host: Dynamo ends the first graph here. A layer norm's rows have mean
        # square about 1, so the branch is taken whatever the rounding (a test on their sum, which is
        # about 0, went either way between eager and compiled runs).
        if h.pow(2).mean() > 0.5:
            h = h * 2.0
        return torch.softmax(self.second(h), dim=-1)


def get_inputs():
    return [torch.randn(batch, width)]


def get_init_inputs():
    return []
