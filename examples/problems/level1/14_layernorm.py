import torch
import torch.nn as nn


class Model(nn.Module):
    """nn.LayerNorm over the hidden dimension of a (batch, seq, hidden) tensor.

    Mean and variance per token, then an affine transform with learned weight and
    bias (randomised here so an identity affine cannot hide a bug).
    """

    def __init__(self, hidden: int):
        super().__init__()
        self.ln = nn.LayerNorm(hidden)
        with torch.no_grad():
            self.ln.weight.uniform_(0.5, 1.5)
            self.ln.bias.uniform_(-0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


batch_size = 16
seq_len = 4096
hidden = 4096

SMALL_SIZES = {"batch_size": 2, "seq_len": 8, "hidden": 128}


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden) * 2.0 + 1.0]


def get_init_inputs():
    return [hidden]
