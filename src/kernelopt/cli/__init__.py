"""The command line: ``kernelopt analyze``, ``kernelopt doctor``."""
