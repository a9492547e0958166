from __future__ import annotations

from kernelopt.cli.main import app

app(prog_name="kernelopt")
