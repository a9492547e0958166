"""As root, no worker can read a key: not by environment, /proc or an inherited descriptor (issue 15, item 3).

Each scenario starts a real parent (``identity_parent.py``) whose initial environment holds the
keys and which holds a key file open on an inheritable descriptor; the worker it starts looks
everywhere it can (``worker_targets.what_a_worker_can_read``) and the secret must be nowhere in
what it read. Keys come from the environment only (``agents/providers/keys.py``): there is no
key-file setting to read, so the key file here stands for any file a parent holds a key in.
Where this Python lies under a private home, so that ``nobody`` cannot start it, the parent runs
in a mount namespace that opens that home (``open_home.py``). A control with
``KERNELOPT_WORKER_USER=root`` proves the search finds a key that is within reach.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from kernelopt.errors import KerneloptError
from kernelopt.workers import identity
from kernelopt.workers.identity import WorkerIdentity, can_reach, lend, worker_cache

TESTS = Path(__file__).resolve().parent
SRC = TESTS.parent / "src"
IS_ROOT = sys.platform.startswith("linux") and os.geteuid() == 0
needs_root = pytest.mark.skipif(not IS_ROOT, reason="workers change user only when kernelopt runs as root on Linux")
NOBODY = WorkerIdentity("nobody", 65534, 65534)


def _secret() -> str:
    return f"sk-test-secret-{secrets.token_hex(8)}"  # made here, so no file or command line holds it


def _parent_command(kind: str, key_file: Path, open_home: bool) -> list[str]:
    command = [sys.executable, str(TESTS / "identity_parent.py"), kind, str(key_file)]
    if not open_home or identity.worker_identity() is not None:
        return command
    if shutil.which("unshare") is None:
        pytest.skip(f"{identity.decide().reason}; and no unshare(1) to open this Python's folders to nobody")
    return ["unshare", "--mount", sys.executable, str(TESTS / "open_home.py"), *command]


def _run_parent(kind: str, tmp_path: Path, secret: str, worker_user: str | None = None) -> dict[str, Any]:
    key_file = tmp_path / "key"
    key_file.write_text(secret)
    key_file.chmod(0o600)
    env = {name: value for name, value in os.environ.items() if not name.startswith("KERNELOPT_")}
    env.update(
        OPENAI_API_KEY=secret,
        ANTHROPIC_API_KEY=secret,
        PYTHONPATH=os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]),
    )
    if worker_user is not None:
        env["KERNELOPT_WORKER_USER"] = worker_user
    command = _parent_command(kind, key_file, open_home=worker_user is None)
    run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["ok"], report["status"]
    return report


def _where(secret: str, seen: dict[str, str]) -> list[str]:
    return sorted(label for label, text in seen.items() if secret in text)


@needs_root
@pytest.mark.parametrize("kind", ["isolated", "persistent", "nested", "nested_isolated"])
def test_a_worker_of_a_root_parent_reads_no_key(kind: str, tmp_path: Path) -> None:
    secret = _secret()
    report = _run_parent(kind, tmp_path, secret)
    if report["identity"] is None:
        pytest.skip(report["reason"])
    seen = report["value"]
    assert _where(secret, seen["found"]) == [], "the worker read a key"
    assert seen["uid"] != 0 and seen["euid"] != 0 and seen["gid"] != 0 and seen["groups"] == []
    assert seen["no_new_privs"] == "1"
    assert "parent environ" in seen["refused"] and "parent fd listing" in seen["refused"]
    assert f"/proc/{report['pid']}/environ" in seen["refused"]  # the parent, seen from any depth
    assert any(label.endswith("/environ") for label in seen["found"])  # the search itself reads /proc
    assert "key file" in seen["refused"]
    if kind.startswith("nested"):
        assert seen["outer_uid"] == 0  # kept at our user, yet its own worker dropped


@needs_root
def test_the_search_finds_a_key_a_root_worker_can_reach(tmp_path: Path) -> None:
    """The control: with workers kept root, the same search finds the key in the parent's environ."""
    secret = _secret()
    report = _run_parent("isolated", tmp_path, secret, worker_user="root")
    assert report["identity"] is None
    seen = report["value"]
    assert seen["uid"] == 0
    assert "parent environ" in _where(secret, seen["found"])
    assert "os.environ" not in _where(secret, seen["found"])  # the allow-list still holds
    assert not any(label.startswith("fd ") for label in _where(secret, seen["found"]))  # close_fds still holds


@needs_root
def test_a_worker_of_this_process_reads_no_key_set_in_os_environ(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, worker_tmp: Path
) -> None:
    """A key set in ``os.environ`` after start-up (never in /proc/<pid>/environ) reaches no worker either."""
    from kernelopt.workers import run_isolated
    from kernelopt.workers.persistent import PersistentWorker

    if identity.worker_identity() is None:
        pytest.skip(identity.decide().reason)
    secret = _secret()
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    key_file = worker_tmp / "key"
    key_file.write_text(secret)
    key_file.chmod(0o600)
    one_shot = run_isolated("worker_targets:what_a_worker_can_read", str(key_file), timeout_s=120, extra_path=[TESTS])
    with PersistentWorker(extra_path=[TESTS]) as worker:
        persistent = worker.call("worker_targets:what_a_worker_can_read", str(key_file), timeout_s=120)
    for outcome in (one_shot, persistent):
        assert outcome.ok, outcome.reason
        assert _where(secret, outcome.value["found"]) == []
        assert outcome.value["uid"] == identity.worker_identity().uid  # type: ignore[union-attr]


@needs_root
def test_an_unknown_worker_user_named_explicitly_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELOPT_WORKER_USER", "no-such-user-for-kernelopt")
    with pytest.raises(KerneloptError, match=r"worker_user='no-such-user-for-kernelopt' \(env KERNELOPT_WORKER_USER\): no such user"):
        identity.decide()


@needs_root
def test_doctor_says_who_workers_run_as() -> None:
    from kernelopt.api.doctor import diagnose

    diagnosis = diagnose(None)
    decision = identity.decide()
    assert diagnosis.workers == decision.reason
    assert (decision.reason in diagnosis.problems) == decision.problem
    assert diagnosis.workers.startswith("workers run as")


def test_reach_is_read_off_every_folder_on_the_way(monkeypatch: pytest.MonkeyPatch) -> None:
    stranger = WorkerIdentity("stranger", os.getuid() + 12345, os.getgid() + 12345)
    if not can_reach(tempfile.gettempdir(), stranger):
        pytest.skip(f"the temp directory {tempfile.gettempdir()} is closed to other users")
    base = Path(tempfile.mkdtemp())
    try:
        base.chmod(0o755)
        closed = base / "closed"
        inner = closed / "inner"
        inner.mkdir(parents=True, mode=0o755)
        closed.chmod(0o700)
        assert can_reach(base, stranger)
        assert not can_reach(inner, stranger)  # closed on the way
        assert can_reach(inner, WorkerIdentity("owner", os.getuid(), os.getgid()))
        closed.chmod(0o710)
        assert not can_reach(inner, stranger)  # the group may pass, the stranger is not in it
        closed.chmod(0o701)
        assert can_reach(inner, stranger)  # others may search it, without listing it
    finally:
        shutil.rmtree(base)


@needs_root
def test_a_workers_cache_is_a_folder_of_its_own(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    if not can_reach(tempfile.gettempdir(), NOBODY):
        pytest.skip(f"the temp directory {tempfile.gettempdir()} is closed to nobody")
    base = Path(tempfile.mkdtemp())
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the fallback goes
    try:
        base.chmod(0o755)
        own = worker_cache(base / "cache" / "triton", NOBODY)
        assert own == base / "cache" / "triton-nobody" and own.stat().st_uid == NOBODY.uid
        assert worker_cache(base / "cache" / "triton", None) == base / "cache" / "triton"  # our user shares ours
        base.chmod(0o700)  # as root's home is: the workers' cache moves to the temp directory
        own = worker_cache(base / "cache" / "triton", NOBODY)
        assert own == tmp_path / "kernelopt-triton-nobody" and own.stat().st_uid == NOBODY.uid
    finally:
        shutil.rmtree(base)


@needs_root
def test_a_planted_cache_folder_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    planted = tmp_path / "kernelopt-triton-nobody"
    planted.symlink_to(private)
    with pytest.raises(KerneloptError, match="not a folder kernelopt made for nobody's cache"):
        worker_cache(private / "cache" / "triton", NOBODY)


@needs_root
def test_lending_opens_a_file_to_the_workers_group_only(tmp_path: Path) -> None:
    file = tmp_path / "shm"
    file.write_bytes(b"x")
    file.chmod(0o600)
    lend([str(file)], [], NOBODY)
    info = file.stat()
    assert (info.st_uid, info.st_gid, info.st_mode & 0o777) == (0, NOBODY.gid, 0o660)
    lend([str(file)], [], None)  # nothing to lend to our own user
    link = tmp_path / "link"
    link.symlink_to(file)
    with pytest.raises(OSError, match="is a link"):
        lend([str(link)], [], NOBODY)


def test_a_root_judge_refuses_to_lend_cuda_memory_to_another_user(monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver refuses CUDA IPC between users (measured on the H200): say so before anything is built,
    in one line naming both ways out, instead of a candidate 'dying' on its first launch."""
    from kernelopt.evaluate.remote import RemoteRunner
    from kernelopt.workers import identity

    monkeypatch.setattr(identity.os, "geteuid", lambda: 0)
    with pytest.raises(KerneloptError, match="cannot lend CUDA buffers to workers running as 'nobody'.*KERNELOPT_WORKER_USER=root"):
        identity.check_cuda_lending(NOBODY)
    identity.check_cuda_lending(None)  # workers of this process's own user open every handle
    monkeypatch.setattr(identity, "worker_identity", lambda: NOBODY)
    monkeypatch.setattr("kernelopt.evaluate.remote.worker_identity", lambda: NOBODY)
    with pytest.raises(KerneloptError, match="cannot lend CUDA buffers"):
        RemoteRunner(device="cuda")
    RemoteRunner(device="cpu").close()  # CPU tensors travel as files lent to the worker's group
    monkeypatch.setattr(identity.os, "geteuid", lambda: NOBODY.uid)  # a judge that is itself a worker
    identity.check_cuda_lending(NOBODY)


@needs_root
def test_a_saved_model_goes_where_the_workers_user_can_read_it_and_no_one_else(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from kernelopt.workers.identity import can_read, readable_root

    if not can_reach(tempfile.gettempdir(), NOBODY):
        pytest.skip(f"the temp directory {tempfile.gettempdir()} is closed to nobody")
    base = Path(tempfile.mkdtemp())
    fallback = Path(tempfile.mkdtemp())
    monkeypatch.setattr(tempfile, "tempdir", str(fallback))  # where the fallback goes
    try:
        base.chmod(0o755)
        fallback.chmod(0o755)
        assert readable_root(base / "cache" / "models", NOBODY) == base / "cache" / "models"  # reachable: kept
        assert readable_root(base / "cache" / "models", None) == base / "cache" / "models"
        base.chmod(0o700)  # as root's home is (every kernelopt.optimize on the H200 failed there)
        own = readable_root(base / "cache" / "models", NOBODY)
        info = own.stat()
        assert own == fallback / "kernelopt-models-for-nobody"
        assert (info.st_uid, info.st_gid, info.st_mode & 0o777) == (0, NOBODY.gid, 0o750)  # its group alone
        (own / "bundle").mkdir(mode=0o755)
        assert can_read(own / "bundle", NOBODY)
        assert not can_read(own / "bundle", WorkerIdentity("stranger", 12345, 12345))
        (fallback / "kernelopt-other-for-nobody").symlink_to(base)
        with pytest.raises(KerneloptError, match="not a folder kernelopt made for nobody"):
            readable_root(base / "other", NOBODY)
    finally:
        shutil.rmtree(base)
        shutil.rmtree(fallback)


@needs_root
def test_a_workdir_the_workers_user_cannot_enter_is_refused_before_anything_is_saved(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import torch

    from kernelopt.problem.saved import save_model_problem

    monkeypatch.setattr(identity, "worker_identity", lambda: NOBODY)
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    with pytest.raises(KerneloptError, match="nobody, the user kernelopt's workers run as .* cannot enter") as caught:
        save_model_problem(torch.nn.Linear(2, 2).eval(), [torch.ones(1, 2)], private / "bundle")
    assert "\n" not in str(caught.value)
    assert not (private / "bundle" / "model.pt").exists()


@needs_root
def test_a_file_in_a_private_folder_is_lent_as_a_copy_only_the_workers_group_reads(tmp_path: Path) -> None:
    """A bench problem's export lay in its private folder: every stock mode's worker (nobody) failed to
    read it, and the scoreboard fell back to ratios of times from different processes."""
    from kernelopt.workers.identity import can_read, lent_copy

    if not can_reach(tempfile.gettempdir(), NOBODY):
        pytest.skip(f"the temp directory {tempfile.gettempdir()} is closed to nobody")
    private = Path(tempfile.mkdtemp())  # mode 700, as a worker's own folder is
    try:
        export = private / "m.kopt.json"
        export.write_text('{"verified": true}')
        assert not can_read(export, NOBODY)
        with lent_copy(export, NOBODY) as readable:
            assert readable != export and readable.read_text() == export.read_text()
            assert can_read(readable, NOBODY)
            assert not can_read(readable, WorkerIdentity("stranger", 12345, 12345))  # its group alone
            assert (readable.stat().st_mode & 0o777, readable.parent.stat().st_mode & 0o777) == (0o640, 0o750)
        assert not readable.exists() and not readable.parent.exists()  # gone after the block
        with lent_copy(export, None) as same:  # workers of our own user read it where it is
            assert same == export
        private.chmod(0o755)
        export.chmod(0o644)
        with lent_copy(export, NOBODY) as same:
            assert same == export
    finally:
        shutil.rmtree(private, ignore_errors=True)


@needs_root
def test_the_stock_modes_are_timed_against_a_copy_of_the_export_their_worker_can_read(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from kernelopt.pipeline import stock_modes
    from kernelopt.workers.identity import can_read

    if not can_reach(tempfile.gettempdir(), NOBODY):
        pytest.skip(f"the temp directory {tempfile.gettempdir()} is closed to nobody")
    monkeypatch.setattr(stock_modes, "worker_identity", lambda: NOBODY)
    private = Path(tempfile.mkdtemp())
    export = private / "p.kopt.json"
    export.write_text("{}")
    seen: list[tuple[str, bool]] = []

    def run(target: str, problem: str, mode: str, seed: int, trials: int, exported: str, *rest: Any, **kw: Any) -> Any:
        seen.append((exported, can_read(exported, NOBODY)))
        return type("R", (), {"ok": True, "value": {"mode": mode}})()

    try:
        stock = stock_modes.time_stock_modes(str(tmp_path / "p.py"), ["default", "reduce-overhead"], str(export), run=run)
    finally:
        shutil.rmtree(private, ignore_errors=True)
    assert stock == {"default": {"mode": "default"}, "reduce-overhead": {"mode": "reduce-overhead"}}
    assert len({path for path, _ in seen}) == 1 and all(readable for _, readable in seen)
    assert seen[0][0] != str(export) and not Path(seen[0][0]).exists()  # a copy, removed once timed
