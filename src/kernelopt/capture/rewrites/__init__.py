"""kernelopt's own compile options (graph rewrites run as Inductor post-grad passes) and the CUDA ops
they put in a graph: the online softmax, the thread-block-cluster row softmax and row norm. The table of
options is :mod:`~kernelopt.capture.rewrites.passes`."""
