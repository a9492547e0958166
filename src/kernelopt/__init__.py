"""kernelopt: faster torch.compile'd models through verified Triton kernel search."""

from kernelopt.errors import KerneloptError, ProblemError

__version__ = "0.1.0"

__all__ = ["KerneloptError", "ProblemError", "__version__"]
