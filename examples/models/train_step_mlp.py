"""One training step of a pre-norm MLP block with a cross-entropy loss (``kernelopt optimize --train``).

Our own example model for issue 14's training: the forward and AOTAutograd's backward
graphs are both captured; the backward's generated kernels (the layer norm's and the
GELU's gradients, the loss's softmax backward) are targets like the forward's; the model
gate compares the loss's logits and every parameter's gradient against float64.
Pure torch.
"""

import torch
import torch.nn.functional as F
from torch import nn

batch = 8192
width = 2048
classes = 1000
SMALL_SIZES = {"batch": 16, "width": 32, "classes": 10}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width)
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        h = x + self.down(F.gelu(self.up(self.norm(x))))
        return self.head(h)


def get_loss(logits):
    """Cross entropy against fixed labels (row i is of class i mod classes), in the logits' own dtype:
    no cast, so the model gate's float64 step computes its loss in float64 too."""
    labels = torch.arange(logits.shape[0], device=logits.device) % logits.shape[1]
    return F.cross_entropy(logits, labels)


def get_inputs():
    return [torch.randn(batch, width)]


def get_init_inputs():
    return []
