"""The temporary folders of kernelopt's uncached compiles (kernelopt.capture.compile_scratch): Inductor
keeps one per compile when its caches are off; they go to a working folder of the process's own
(kernelopt.workers.workdirs), removed when the process exits or, after a kill, by the next sweep."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import torch

from kernelopt.capture import capture, compat
from kernelopt.capture.compile_scratch import scratch_dir
from kernelopt.workers.workdirs import sweep_stale

SRC = str(Path(__file__).resolve().parents[1] / "src")


class Scaled(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x * 3, dim=-1)


def test_a_capture_keeps_its_compile_in_the_process_s_folder_not_in_inductor_s() -> None:
    inductor = Path(compat.inductor_cache_dir())

    def compile_folders(folder: Path) -> set[str]:  # what Inductor names them (mkdtemp's tmpXXXXXXXX)
        return {p.name for p in folder.iterdir() if p.is_dir() and p.name.startswith("tmp")}

    before = compile_folders(inductor)
    ours = {p.name for p in scratch_dir().iterdir()}
    artifact = capture(Scaled(), [torch.randn(4, 64)], {})
    torch.testing.assert_close(artifact.compiled(torch.ones(4, 64)), torch.full((4, 64), 1 / 64))
    assert compile_folders(inductor) - before == set()  # (a first compile may add shared files there)
    assert len({p.name for p in scratch_dir().iterdir()} - ours) == 1  # the compile's own folder
    assert os.environ.get("TORCHINDUCTOR_CACHE_DIR") != str(scratch_dir())  # the setting is given back


def _child(body: str) -> subprocess.Popen:
    code = textwrap.dedent(
        f"""
        import sys, time, torch
        from kernelopt.capture import capture
        from kernelopt.capture.compile_scratch import scratch_dir

        class Scaled(torch.nn.Module):
            def forward(self, x):
                return torch.softmax(x * 3, dim=-1)

        capture(Scaled(), [torch.randn(4, 64)], {{}})
        print(scratch_dir(), flush=True)
        {body}
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)


def test_a_process_that_exits_leaves_no_folder_and_a_killed_one_s_is_swept() -> None:
    done = _child("")
    folder = Path(done.stdout.readline().strip())  # type: ignore[union-attr]
    assert done.wait(timeout=300) == 0
    assert folder.parent == Path(tempfile.gettempdir()).resolve() and not folder.exists()

    killed = _child("time.sleep(600)")
    folder = Path(killed.stdout.readline().strip())  # type: ignore[union-attr]
    assert any(folder.iterdir())  # the compile's code is there while the process runs
    assert folder not in sweep_stale() and folder.exists()  # a running process's folder stays
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=60)
    assert folder.exists()  # no exit handler ran
    assert folder in sweep_stale() and not folder.exists()
