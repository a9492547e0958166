import torch, sys
from kernelopt.capture.rewrites import group_norm_op  # noqa
x = torch.randn(64, 320, 64, 64, device="cuda", dtype=torch.bfloat16)
w = torch.rand(320, device="cuda", dtype=torch.bfloat16) + 0.5
b = torch.randn(320, device="cuda", dtype=torch.bfloat16)
for form, c in (("held", 2),):
    for _ in range(2):
        torch.ops.kernelopt.group_norm(x, w, b, 32, 1e-5, clusters=c, form=form)
torch.cuda.synchronize()
