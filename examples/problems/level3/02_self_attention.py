import torch
import torch.nn as nn


class Model(nn.Module):
    """Multi-head self-attention written out: QKV projection, ``softmax(q k^T / sqrt(d)) v``, output projection.

    No fused SDPA call: the score matrix (batch x heads x seq x seq, 2 GiB here) is
    materialised, so the scale + softmax kernel between the two ``bmm`` calls is
    the main Triton cost.
    """

    def __init__(self, d_model: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        qkv = self.qkv(x).view(b, t, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = torch.matmul(q, k.transpose(-2, -1)) * (self.head_dim**-0.5)
        attn = torch.softmax(scores, dim=-1)
        out = torch.matmul(attn, v).transpose(1, 2).reshape(b, t, c)
        return self.proj(out)


batch_size = 32
seq_len = 1024
d_model = 1024
num_heads = 16

SMALL_SIZES = {"batch_size": 2, "seq_len": 16, "d_model": 32, "num_heads": 4}


def get_inputs():
    return [torch.randn(batch_size, seq_len, d_model)]


def get_init_inputs():
    return [d_model, num_heads]
