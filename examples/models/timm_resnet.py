"""A timm ResNet-18 in fp32, built with random weights (nothing downloaded).

Our own example model for issue 14: a real vision architecture through ``timm``
(convolutions to cuDNN, batch norm folded at inference, ReLU and pooling as
generated kernels). Needs ``timm`` (on the GPU image; ``pip install timm``).
"""

import timm
import torch
from torch import nn

batch = 64
image = 224
classes = 1000
SMALL_SIZES = {"batch": 2, "image": 32, "classes": 10}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = timm.create_model("resnet18", pretrained=False, num_classes=classes)

    def forward(self, x):
        return self.net(x)


def get_inputs():
    return [torch.randn(batch, 3, image, image)]


def get_init_inputs():
    return []
