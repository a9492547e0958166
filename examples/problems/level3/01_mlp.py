import torch
import torch.nn as nn


class Model(nn.Module):
    """A four-layer MLP: Linear + ReLU three times, then a final Linear.

    Four GEMMs to cuBLAS with bias + ReLU epilogues in between; the Triton share
    of the time is small, which is the point (Amdahl bound).
    """

    def __init__(self, in_features: int, hidden1: int, hidden2: int, hidden3: int, out_features: int):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(in_features, hidden1),
            nn.ReLU(),
            nn.Linear(hidden1, hidden2),
            nn.ReLU(),
            nn.Linear(hidden2, hidden3),
            nn.ReLU(),
            nn.Linear(hidden3, out_features),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


batch_size = 2048
in_features = 8192
hidden1 = 8192
hidden2 = 4096
hidden3 = 4096
out_features = 1024

SMALL_SIZES = {
    "batch_size": 8,
    "in_features": 64,
    "hidden1": 64,
    "hidden2": 48,
    "hidden3": 32,
    "out_features": 16,
}


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, hidden1, hidden2, hidden3, out_features]
