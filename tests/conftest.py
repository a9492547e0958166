"""Shared test configuration: ``gpu`` tests skip cleanly where torch sees no CUDA device."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "problems"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU with CUDA (none visible to torch)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
