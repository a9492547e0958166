from kernelopt.cli.main import app

app(prog_name="kernelopt")
