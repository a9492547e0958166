"""kernelopt's own CUDA sources live in files beside their modules: they ship with the package, and every
source a module builds from them has each placeholder filled in."""

from __future__ import annotations

import fnmatch
import itertools
import re
from pathlib import Path

import pytest
import torch

import kernelopt
from kernelopt.capture.rewrites import group_norm_host, group_norm_kernel, row_softmax_kernel

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(kernelopt.__file__).parent
# a placeholder: capitals between double underscores, as ``__THREADS__``; the preprocessor's own are not
PLACEHOLDER = re.compile(r"__[A-Z][A-Z0-9_]*__")
PREPROCESSOR = {"__FILE__", "__LINE__", "__CUDA_ARCH__"}


def _left(source: str) -> set[str]:
    return set(PLACEHOLDER.findall(source)) - PREPROCESSOR


def test_every_file_of_the_package_that_is_not_python_is_shipped_by_a_package_data_pattern() -> None:
    """A wheel carries only what ``pyproject.toml``'s package data names: a CUDA file beside its module that no
    pattern names would build from an editable install and fail in every installed one."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 on
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["kernelopt"]
    data = [
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*")
        if path.is_file() and path.suffix not in (".py", ".pyc")
    ]
    assert {"capture/rewrites/group_norm_kernel.cu", "capture/rewrites/cluster_prelude.cuh"} <= set(data)
    unshipped = [name for name in data if not any(fnmatch.fnmatchcase(name, p) for p in patterns)]
    assert not unshipped, f"add a package-data pattern for {unshipped}"


def test_every_own_kernel_source_has_each_placeholder_filled_for_every_build() -> None:
    """The modules fill the files' placeholders by text: a placeholder added to a file but not to its
    module would reach nvcc as a name it does not know (or, in a comment, say nothing true)."""
    files = {name: row_softmax_kernel.packaged(name) for name in ("cluster_prelude.cuh", "row_softmax_kernel.cu")}
    files["group_norm_kernel.cu"] = row_softmax_kernel.packaged("group_norm_kernel.cu")
    assert all(_left(text) for name, text in files.items() if name != "cluster_prelude.cuh")  # the test sees them
    built = [group_norm_kernel.source_for(dtype) for dtype in group_norm_kernel.DTYPES]
    built += [
        row_softmax_kernel.source_for(inp, out, pieces, fast_exp, streaming)
        for (inp, out), pieces, fast_exp, streaming in itertools.product(
            row_softmax_kernel.PAIRS, (1, 2), (False, True), (False, True)
        )
    ]
    built.append(group_norm_host.source(plans_kept=8))
    for source in built:
        assert not _left(source), sorted(_left(source))
    assert group_norm_kernel.source_for(torch.bfloat16).startswith(files["cluster_prelude.cuh"])
    assert "__nv_bfloat16" in group_norm_kernel.source_for(torch.bfloat16)
