import torch
import torch.nn as nn


class Model(nn.Module):
    """Mean over the outermost dimension (column means of a tall matrix).

    The reduction runs across rows, so the output is a single contiguous row and
    the work has to be split along the reduced axis to fill the GPU.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mean(x, dim=0)


num_rows = 131072
num_cols = 4096

SMALL_SIZES = {"num_rows": 256, "num_cols": 64}


def get_inputs():
    # a per-column offset keeps the means O(1); plain randn would give means near 0
    return [torch.randn(num_rows, num_cols) + torch.randn(num_cols)]


def get_init_inputs():
    return []
