"""A two-layer Llama-style decoder in bf16, built from a config with random weights (nothing downloaded).

Our own example model for issue 14: real attention, RMSNorm, SwiGLU and rotary
embeddings through ``transformers``, at a small batch where the compiled forward
is launch-bound. Needs the ``models`` extra (``transformers``).
"""

import torch
from torch import nn
from transformers import LlamaConfig, LlamaModel

batch = 4
seq_len = 256
hidden = 512
layers = 2
heads = 8
vocab = 4096
SMALL_SIZES = {"batch": 1, "seq_len": 16, "hidden": 64, "layers": 1, "heads": 4, "vocab": 128}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        config = LlamaConfig(
            hidden_size=hidden,
            intermediate_size=hidden * 4,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=heads,
            vocab_size=vocab,
            max_position_embeddings=max(seq_len, 64),
            attn_implementation="sdpa",
        )
        self.decoder = LlamaModel(config).to(torch.bfloat16)

    def forward(self, input_ids):
        return self.decoder(input_ids=input_ids, use_cache=False).last_hidden_state


def get_inputs():
    return [torch.randint(0, vocab, (batch, seq_len))]


def get_init_inputs():
    return []
