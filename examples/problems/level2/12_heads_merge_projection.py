import torch
import torch.nn as nn


class Model(nn.Module):
    """Merge attention heads, then project: ``linear(o.transpose(1, 2).reshape(b, s, h * d))``, in bf16.

    The output projection of attention. Heads arrive as (batch, heads, seq, head_dim), and the matmul
    wants rows of (seq) with all heads side by side, a layout no stride can express, so the compiler
    writes a layout copy in front of the vendor matmul: a kernel that only moves data, whose time no
    launch config removes (a tenth or more of the time here, where the matmul runs on tensor cores).
    """

    def __init__(self, heads: int, head_dim: int):
        super().__init__()
        self.proj = nn.Linear(heads * head_dim, heads * head_dim, dtype=torch.bfloat16)

    def forward(self, o: torch.Tensor) -> torch.Tensor:
        b, h, s, d = o.shape
        return self.proj(o.transpose(1, 2).reshape(b, s, h * d))


batch_size = 8
heads = 32
seq_len = 2048
head_dim = 128

SMALL_SIZES = {"batch_size": 2, "heads": 2, "seq_len": 8, "head_dim": 4}


def get_inputs():
    return [torch.randn(batch_size, heads, seq_len, head_dim, dtype=torch.bfloat16)]


def get_init_inputs():
    return [heads, head_dim]
