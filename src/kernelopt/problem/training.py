"""A problem's training step as a model of its own: outputs and every parameter's gradient.

``kernelopt optimize --train`` wraps the problem's model in :class:`TrainingStep`, whose
forward runs the model in train mode, takes the loss (the problem's ``get_loss(outputs)``,
else the sum of its floating outputs) and returns the outputs followed by the gradient of
every parameter. Everything downstream sees an ordinary model: the capture compiles the
forward and AOTAutograd's backward graph (the gradient call breaks Dynamo's graph there,
so the backward runs as Inductor compiled it), backward kernels are recorded and searched
like forward ones, and the model gate compares outputs and gradients against the same step
in float64. Optimizer steps are out of scope.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from kernelopt.errors import ProblemError

LossFn = Callable[[Any], torch.Tensor]


def sum_of_outputs(outputs: Any) -> torch.Tensor:
    """The default loss: every floating output summed (a tuple of outputs adds up), in at least fp32
    and in float64 where the outputs are (the model gate's reference step stays float64 throughout)."""
    items = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    floating = [o for o in items if isinstance(o, torch.Tensor) and o.is_floating_point()]
    if not floating:
        raise ProblemError("the model returns no floating tensor: define get_loss(outputs) to train it")
    parts = [o.to(torch.promote_types(o.dtype, torch.float32)).sum() for o in floating]
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total


def check_trainable(model: nn.Module, where: str) -> list[tuple[str, nn.Parameter]]:
    """The parameters a training step differentiates; refuses what cannot be compared to float64."""
    for name, module in model.named_modules():
        p = getattr(module, "p", None)
        if isinstance(module, nn.modules.dropout._DropoutNd) and p:
            raise ProblemError(
                f"{where}: {name or 'the model'} is a {type(module).__name__} with p={p}; random masks cannot be "
                "compared against float64: set p=0 for kernelopt --train"
            )
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if not params:
        raise ProblemError(f"{where}: the model has no parameter that requires grad; nothing to train")
    return params


class TrainingStep(nn.Module):
    """``forward(*inputs)`` -> (*outputs, *gradients), one gradient per trainable parameter, in
    ``named_parameters`` order (``grad_names``); a parameter the loss does not reach gets zeros."""

    def __init__(self, model: nn.Module, loss: LossFn | None = None, where: str = "<problem>") -> None:
        super().__init__()
        self.model = model.train()
        self.loss = loss or sum_of_outputs
        self.grad_names = [n for n, _ in check_trainable(model, where)]

    def forward(self, *inputs: Any) -> tuple[torch.Tensor, ...]:
        with torch.enable_grad():
            outputs = self.model(*inputs)
            params = [p for _, p in self.model.named_parameters() if p.requires_grad]
            grads = torch.autograd.grad(self.loss(outputs), params, allow_unused=True)
        items = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
        filled = [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads)]
        return (*(o.detach() for o in items), *filled)
