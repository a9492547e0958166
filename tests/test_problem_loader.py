"""CPU tests of the problem loader: every broken file is one ProblemError line naming the file and fault."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from kernelopt.errors import KerneloptError, ProblemError
from kernelopt.problem import DISTRIBUTIONS, apply_distribution, load_problem, load_suite

GOOD = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return self.linear(x)


batch = 4
dim = 16
hidden = dim * 4
scale = 0.5
shape = (2, 3)
name = "not a size"

SMALL_SIZES = {"batch": 2, "dim": 8}


def get_inputs():
    return [torch.randn(batch, dim), 7, torch.arange(3)]


def get_init_inputs():
    return [dim]
"""

# A minimal valid file whose parts the fault tests replace one at a time.
PARTS = {
    "imports": "import torch\nimport torch.nn as nn\n",
    "model": textwrap.dedent(
        """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()

            def forward(self, x):
                return x * 2
        """
    ),
    "get_inputs": "def get_inputs():\n    return [torch.randn(4)]\n",
    "get_init_inputs": "def get_init_inputs():\n    return []\n",
}


def write(tmp_path: Path, text: str, name: str = "prob.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def variant(tmp_path: Path, name: str = "prob.py", **replace: str) -> Path:
    parts = {**PARTS, **replace}
    return write(tmp_path, "\n".join(parts.values()), name)


def model_with_forward(body: str) -> str:
    return textwrap.dedent(
        f"""
        class Model(nn.Module):
            def forward(self, x):
                {body}
        """
    )


def problem_error(path: Path, action) -> str:
    """Run ``action`` expecting a ProblemError; check the message shape and return it."""
    with pytest.raises(ProblemError) as info:
        action()
    message = str(info.value)
    assert "\n" not in message, message
    assert message.startswith(str(path)), message
    return message


def load_error(path: Path) -> str:
    return problem_error(path, lambda: load_problem(path))


def check_error(path: Path) -> str:
    problem = load_problem(path)
    return problem_error(path, lambda: problem.check("cpu"))


# -- faults found while loading ---------------------------------------------------------


def test_valid_variant_checks(tmp_path: Path) -> None:
    outs = load_problem(variant(tmp_path)).check("cpu")
    assert len(outs) == 1 and outs[0].shape == (4,)


def test_syntax_error_names_line(tmp_path: Path) -> None:
    path = write(tmp_path, "import torch\n\ndef get_inputs(:\n    return []\n")
    message = load_error(path)
    assert message.startswith(f"{path}:3:")
    assert "syntax error" in message


@pytest.mark.parametrize("missing", ["Model", "get_inputs", "get_init_inputs"])
def test_missing_required_name(tmp_path: Path, missing: str) -> None:
    key = {"Model": "model"}.get(missing, missing)
    message = load_error(variant(tmp_path, **{key: ""}))
    assert f"defines no {missing};" in message
    others = {"Model", "get_inputs", "get_init_inputs"} - {missing}
    assert not any(f"defines no {o}" in message for o in others)


def test_model_not_a_module(tmp_path: Path) -> None:
    message = load_error(variant(tmp_path, model="class Model:\n    pass\n"))
    assert "Model is not a torch.nn.Module subclass" in message


def test_import_error_at_module_level(tmp_path: Path) -> None:
    path = variant(tmp_path, imports="import torch\nimport torch.nn as nn\nimport kernelopt_no_such_module_xyz\n")
    message = load_error(path)
    assert "executing the file raised ModuleNotFoundError" in message
    assert "kernelopt_no_such_module_xyz" in message


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.py"
    assert "no such problem file" in load_error(path)


def test_binary_file(tmp_path: Path) -> None:
    path = tmp_path / "garbage.bin"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe\x80")
    assert "cannot read the file" in load_error(path)


def test_text_file_with_null_bytes(tmp_path: Path) -> None:
    path = tmp_path / "garbage.dat"
    path.write_bytes(b"import torch\x00\x01\x02\n")
    message = load_error(path)
    assert "syntax error" in message
    assert ":None" not in message


# -- faults found when the file's code runs -------------------------------------------------


def test_get_init_inputs_returns_non_list(tmp_path: Path) -> None:
    path = variant(tmp_path, get_init_inputs="def get_init_inputs():\n    return 3\n")
    message = check_error(path)
    assert "get_init_inputs() returned int" in message and "must return a list" in message


def test_constructor_raises(tmp_path: Path) -> None:
    model = textwrap.dedent(
        """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                raise RuntimeError("bad\\nweights")

            def forward(self, x):
                return x
        """
    )
    message = check_error(variant(tmp_path, model=model))
    assert "Model(*get_init_inputs()) raised" in message
    assert "RuntimeError" in message and "bad weights" in message


def test_forward_raises(tmp_path: Path) -> None:
    message = check_error(variant(tmp_path, model=model_with_forward("raise ValueError('oops')")))
    assert "Model.forward raised ValueError: oops" in message


def test_forward_returns_int(tmp_path: Path) -> None:
    message = check_error(variant(tmp_path, model=model_with_forward("return 3")))
    assert "forward returned int" in message and "outputs must be a tensor" in message


def test_forward_returns_tuple_with_non_tensor(tmp_path: Path) -> None:
    message = check_error(variant(tmp_path, model=model_with_forward("return (x, 'label')")))
    assert "output 1 is str" in message


def test_forward_returns_empty_tuple(tmp_path: Path) -> None:
    message = check_error(variant(tmp_path, model=model_with_forward("return ()")))
    assert "forward returned an empty tuple" in message


def test_get_inputs_raises(tmp_path: Path) -> None:
    path = variant(tmp_path, get_inputs="def get_inputs():\n    raise KeyError('size')\n")
    problem = load_problem(path)
    message = problem_error(path, lambda: problem.make_inputs(0))
    assert "get_inputs() raised KeyError" in message


def test_get_inputs_on_wrong_device(tmp_path: Path) -> None:
    path = variant(tmp_path, get_inputs="def get_inputs():\n    return [torch.empty(4, device='meta')]\n")
    problem = load_problem(path)
    message = problem_error(path, lambda: problem.make_inputs(0, "cpu"))
    assert "input 0 on meta" in message
    assert "build inputs without a device argument" in message
    # check() reports the same fault
    assert "build inputs without a device argument" in check_error(path)


# -- sizes ----------------------------------------------------------------------------------


def test_sizes_lists_numeric_top_level_constants(tmp_path: Path) -> None:
    problem = load_problem(write(tmp_path, GOOD))
    # hidden is derived (not a literal); name is a string; SMALL_SIZES is a dict.
    assert problem.sizes == {"batch": 4, "dim": 16, "scale": 0.5, "shape": (2, 3)}


def test_with_sizes_rewrites_and_derived_constants_follow(tmp_path: Path) -> None:
    problem = load_problem(write(tmp_path, GOOD))
    assert problem.module.hidden == 64
    smaller = problem.with_sizes(dim=8)
    assert smaller.module.dim == 8
    assert smaller.module.hidden == 32
    assert smaller.sizes["dim"] == 8
    assert smaller.overrides == {"dim": 8}
    assert smaller.make_inputs(0)[0].shape == (4, 8)
    assert smaller.build_model(0).linear.in_features == 8
    # the original is untouched (a separate module)
    assert problem.module.dim == 16 and problem.module.hidden == 64


def test_with_sizes_unknown_name(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    problem = load_problem(path)
    message = problem_error(path, lambda: problem.with_sizes(no_such_const=3))
    assert "no_such_const" in message


def test_small_uses_small_sizes(tmp_path: Path) -> None:
    small = load_problem(write(tmp_path, GOOD)).small()
    assert (small.module.batch, small.module.dim, small.module.hidden) == (2, 8, 32)


def test_small_without_small_sizes(tmp_path: Path) -> None:
    path = variant(tmp_path)
    problem = load_problem(path)
    assert "SMALL_SIZES" in problem_error(path, problem.small)


# -- seeding and distributions ------------------------------------------------------------------


def test_make_inputs_seeded(tmp_path: Path) -> None:
    problem = load_problem(write(tmp_path, GOOD))
    a, b, c = problem.make_inputs(1), problem.make_inputs(1), problem.make_inputs(2)
    assert torch.equal(a[0], b[0])
    assert not torch.equal(a[0], c[0])
    # seeding is local: the global RNG is not disturbed
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    problem.make_inputs(5)
    assert torch.equal(torch.rand(3), expected)


def test_inputs_are_built_on_the_target_device(tmp_path: Path) -> None:
    # the file's factories run under the target device: nothing is allocated on the CPU first
    problem = load_problem(write(tmp_path, GOOD))
    x = problem.make_inputs(0, "meta")[0]
    assert x.device.type == "meta" and x.shape == (4, 16)
    assert problem.make_inputs(0)[0].device.type == "cpu"
    # a device context around the call does not leak into a CPU build
    with torch.device("meta"):
        assert problem.make_inputs(0, "cpu")[0].device.type == "cpu"


def test_build_model_seeded_and_eval(tmp_path: Path) -> None:
    problem = load_problem(write(tmp_path, GOOD))
    m1, m2, m3 = problem.build_model(0), problem.build_model(0), problem.build_model(1)
    assert not m1.training
    assert torch.equal(m1.linear.weight, m2.linear.weight)
    assert not torch.equal(m1.linear.weight, m3.linear.weight)


def test_distributions_scale_only_floating_tensors(tmp_path: Path) -> None:
    assert DISTRIBUTIONS == {"given": 1.0, "x3": 3.0, "x0.01": 0.01, "neg": -1.0}
    problem = load_problem(write(tmp_path, GOOD))
    base = problem.make_inputs(0)
    for name, factor in DISTRIBUTIONS.items():
        x, n, ints = problem.make_inputs(0, distribution=name)
        torch.testing.assert_close(x, base[0] * factor)
        assert n == 7
        assert ints.dtype == torch.int64 and torch.equal(ints, torch.arange(3))


def test_unknown_distribution() -> None:
    with pytest.raises(KerneloptError, match="unknown input distribution 'x7'"):
        apply_distribution([torch.ones(2)], "x7")


# -- suites ----------------------------------------------------------------------------------


def test_load_suite_reports_broken_files(tmp_path: Path) -> None:
    write(tmp_path, GOOD, "a_good.py")
    write(tmp_path, GOOD, "b_good.py")
    broken = write(tmp_path, "def get_inputs(:\n", "c_broken.py")
    entries = list(load_suite(tmp_path))
    assert [e.name for e in entries] == ["a_good", "b_good", "c_broken"]
    assert all(e.problem is not None and e.error is None for e in entries[:2])
    assert entries[2].problem is None
    assert entries[2].error is not None
    assert entries[2].error.startswith(str(broken)) and "syntax error" in entries[2].error

    only = list(load_suite(tmp_path, only=["b_good"]))
    assert [e.name for e in only] == ["b_good"]


def test_load_suite_empty_dir(tmp_path: Path) -> None:
    with pytest.raises(ProblemError, match="no problem files"):
        list(load_suite(tmp_path))


def test_a_kernel_file_given_where_a_model_problem_is_needed_is_named_as_one() -> None:
    from kernelopt.errors import ProblemError

    for name, kind in (("softmax_naive.py", "Triton"), ("helion_rms_scale.py", "Helion")):
        path = Path(__file__).resolve().parent.parent / "examples" / "kernels" / name
        with pytest.raises(ProblemError, match=rf"a {kind} kernel file, not a model problem; .*optimize {path}"):
            load_problem(path)


def test_launch_arguments_are_described_without_their_data() -> None:
    from kernelopt.problem.layouts import describe_args

    x = torch.randn(4, 6).t()
    described = describe_args(["in_ptr0", "xnumel", "scale", "missing"], [x, 24, 0.5])
    assert described == {"in_ptr0": "float32[6, 4] strides (1, 6)", "xnumel": "24", "scale": "0.5"}
    assert "tensor(" not in str(described)  # no values of the tensor
