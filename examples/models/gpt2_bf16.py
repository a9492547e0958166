"""A four-layer GPT-2 in bf16, built from a config with random weights (nothing downloaded).

Our own example model for issue 14: GPT-2's LayerNorm, GELU MLP and causal
attention through ``transformers``. Needs the ``models`` extra (``transformers``).
"""

import torch
from torch import nn
from transformers import GPT2Config, GPT2Model

batch = 4
seq_len = 256
hidden = 512
layers = 4
heads = 8
vocab = 4096
SMALL_SIZES = {"batch": 1, "seq_len": 16, "hidden": 64, "layers": 1, "heads": 4, "vocab": 128}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        config = GPT2Config(
            n_embd=hidden, n_layer=layers, n_head=heads, vocab_size=vocab, n_positions=max(seq_len, 64),
            attn_implementation="sdpa",
        )
        self.gpt2 = GPT2Model(config).to(torch.bfloat16)

    def forward(self, input_ids):
        return self.gpt2(input_ids=input_ids, use_cache=False).last_hidden_state


def get_inputs():
    return [torch.randint(0, vocab, (batch, seq_len))]


def get_init_inputs():
    return []
