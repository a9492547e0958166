import torch
import torch.nn as nn


class Model(nn.Module):
    """Element-wise ReLU over a 1 GiB fp32 matrix.

    Pure streaming: one read and one write per element, so the only question is
    how close the generated kernel gets to copy bandwidth.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


batch_size = 16384
dim = 16384

SMALL_SIZES = {"batch_size": 8, "dim": 512}


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
