"""The temporary folders of kernelopt's uncached compiles (kernelopt.capture.compile_scratch): Inductor
keeps one per compile when its caches are off; they go to a folder of the process's own, removed when the
process exits or, after a kill, by the next process's sweep."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import torch

from kernelopt.capture import capture, compat
from kernelopt.capture.compile_scratch import scratch_dir, scratch_root, sweep

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
    assert folder.parent == scratch_root() and not folder.exists()

    killed = _child("time.sleep(600)")
    folder = Path(killed.stdout.readline().strip())  # type: ignore[union-attr]
    assert any(folder.iterdir())  # the compile's code is there while the process runs
    assert folder not in sweep(scratch_root()) and folder.exists()  # a running process's folder stays
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=60)
    assert folder.exists()  # no exit handler ran
    assert folder in sweep(scratch_root()) and not folder.exists()


def test_the_sweep_leaves_another_host_s_folders_and_names_it_does_not_know(tmp_path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    other_host = tmp_path / f"elsewhere-{pid}-abc"
    unknown = tmp_path / "notes"
    from kernelopt.capture import compile_scratch

    ours = tmp_path / f"{compile_scratch._host()}-{pid}-abc"
    for folder in (other_host, unknown, ours):
        folder.mkdir()
    assert sweep(tmp_path) == [ours]
    assert other_host.exists() and unknown.exists()


def test_a_folder_others_may_write_to_is_refused_with_the_fix(tmp_path, monkeypatch) -> None:
    import pytest

    from kernelopt.capture import compile_scratch
    from kernelopt.errors import UnsupportedEnvironment

    root = tmp_path / "shared"
    root.mkdir()
    root.chmod(0o777)
    monkeypatch.setattr(compile_scratch, "scratch_root", lambda: root)
    monkeypatch.setattr(compile_scratch, "_made", {})
    with pytest.raises(UnsupportedEnvironment, match="others may write to it.*remove it"):
        compile_scratch.scratch_dir()
    root.chmod(0o700)
    assert compile_scratch.scratch_dir().parent == root
