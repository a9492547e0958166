"""Standalone kernel files: the kind read from the syntax tree, loading, and every bad input's one line."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import ROOT

from kernelopt.errors import ProblemError
from kernelopt.problem.file_kind import HELION, MODEL, TRITON, file_kind, file_shape
from kernelopt.problem.kernel_file import load_kernel_file

KERNELS = ROOT / "examples" / "kernels"
triton = pytest.importorskip("triton")


def test_every_example_kernel_file_is_read_by_its_kind_and_every_problem_as_a_model() -> None:
    kernels = sorted(KERNELS.glob("*.py"))
    assert kernels, "examples/kernels holds the kernel-file examples"
    assert {file_kind(p) for p in kernels} == {TRITON, HELION}
    assert file_kind(KERNELS / "helion_rms_scale.py") == HELION
    assert file_kind(ROOT / "examples" / "problems" / "level1" / "15_rmsnorm.py") == MODEL


def test_a_helion_kernel_is_told_apart_by_its_decorator_whatever_the_import_style() -> None:
    for header, deco in (("import helion", "@helion.kernel()"), ("from helion import kernel", "@kernel"),
                         ("import helion as hl", "@hl.kernel(config=None)")):  # fmt: skip
        shape = file_shape(f"{header}\n{deco}\ndef add(x, y):\n    return x\ndef get_inputs():\n    return []\n")
        assert shape.kind == HELION and shape.kernels == ("add",)


def test_a_jit_kernel_without_launch_names_the_missing_entry_point(tmp_path: Path) -> None:
    path = tmp_path / "k.py"
    path.write_text("import triton\n@triton.jit\ndef k(x):\n    pass\n")
    with pytest.raises(ProblemError, match=r"k\.py: defines @triton.jit kernels \(k\) but no launch"):
        file_kind(path)


def test_a_file_of_no_known_kind_says_what_each_kind_defines(tmp_path: Path) -> None:
    path = tmp_path / "plain.py"
    path.write_text("x = 1\n")
    with pytest.raises(ProblemError, match="not a problem, Triton or Helion kernel file; a problem file defines"):
        file_kind(path)
    with pytest.raises(ProblemError, match="no such file"):
        file_kind(tmp_path / "missing.py")


def test_loading_runs_the_file_and_finds_entry_params_kernels_and_sizes() -> None:
    k = load_kernel_file(KERNELS / "softmax_naive.py").small()
    assert (k.kind, k.entry_name, k.params, k.kernels) == (TRITON, "launch", ("x",), ("softmax_kernel",))
    assert k.sizes["ROWS"] == 6 and k.sizes["COLS"] == 50
    x = k.make_inputs(0)
    assert x[0].shape == (6, 50)
    torch.testing.assert_close(k.run_entry(x), k.reference(*x))  # the interpreter runs the real kernel


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("import triton\n@triton.jit\ndef k(x):\n    pass\ndef launch(x):\n    return x\n", "defines no get_inputs"),
        (
            "import triton\n@triton.jit\ndef k(x):\n    pass\nlaunch = 3\ndef launch(x):\n    return x\n"
            "def get_inputs():\n    return []\nlaunch = 3\n",
            "launch is not callable",
        ),
        (
            "import triton\n@triton.jit\ndef k(x):\n    pass\ndef launch(x):\n    return x\n"
            "def get_inputs():\n    return []\nreference = 1\n",
            "reference is not a function",
        ),
        (
            "import triton\n@triton.jit\ndef k(x):\n    pass\ndef launch(x):\n    return 1/0\ndef get_inputs(:\n",
            "syntax error",
        ),
        (
            "import nothing_here\nimport triton\n@triton.jit\ndef k(x):\n    pass\ndef launch(x):\n    return x\n"
            "def get_inputs():\n    return []\n",
            "ModuleNotFoundError",
        ),  # fmt: skip
    ],
)
def test_each_broken_kernel_file_is_one_line_naming_the_file(tmp_path: Path, text: str, error: str) -> None:
    path = tmp_path / "broken.py"
    path.write_text(text)
    with pytest.raises(ProblemError, match=error) as caught:
        load_kernel_file(path)
    assert str(caught.value).startswith(str(path)) and "\n" not in str(caught.value)


def test_a_problem_file_is_refused_by_the_kernel_file_loader() -> None:
    with pytest.raises(ProblemError, match="is a problem file"):
        load_kernel_file(ROOT / "examples" / "problems" / "level1" / "15_rmsnorm.py")


def test_an_entry_that_raises_is_the_files_fault_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "raises.py"
    path.write_text(
        "import triton\n@triton.jit\ndef k(x):\n    pass\ndef launch(x):\n    raise ValueError('bad shape')\n"
        "def get_inputs():\n    return []\n"
    )
    with pytest.raises(ProblemError, match=r"raises\.py: launch\(\) raised ValueError: bad shape"):
        load_kernel_file(path).run_entry([torch.zeros(1)])


def test_kernel_calls_records_what_launch_passes_each_kernel_and_puts_the_kernels_back() -> None:
    from conftest import FIXTURES

    two = load_kernel_file(FIXTURES / "kernel_files" / "two_kernels.py", overrides={"N": 300})
    kernels = (two.module.scale_kernel, two.module.add_kernel)
    x, y = two.make_inputs(0)
    calls = two.kernel_calls([x, y], ["scale_kernel", "add_kernel"])
    ((scale,), (add,)) = calls["scale_kernel"], calls["add_kernel"]
    assert scale.args[0] is x and scale.args[2] == 300 and scale.keywords == {"BLOCK": 256}
    assert add.args[1] is y and add.args[0] is not x  # launch's own intermediate, not a file input
    torch.testing.assert_close(add.args[0], 2.0 * x)  # it ran: the recorded tensors hold what the kernel got
    assert (two.module.scale_kernel, two.module.add_kernel) == kernels
    (copied,) = two.kernel_calls([x, y], ["scale_kernel"], copy=True)["scale_kernel"]
    assert copied.args[0] is not x and torch.equal(copied.args[0], x)
