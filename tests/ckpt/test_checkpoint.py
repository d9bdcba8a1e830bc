"""tidepool_ckpt.Checkpointer: atomic saves, keep-last-N, latest, async saves, SIGTERM, progress."""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from scheduler.node.runtime.progress import read_progress
from tidepool_ckpt import Checkpointer

STATE = {"weights": [0.1, -2.5e-300, 1 / 3], "step_size": 0.01, "name": "linear"}


@pytest.mark.parametrize("serializer", ["pickle", "json"])
def test_save_then_latest_returns_the_state_exactly(tmp_path: Path, serializer: str) -> None:
    ckpt = Checkpointer(tmp_path, serializer=serializer)
    assert ckpt.latest() is None

    path = ckpt.save(120, STATE)

    assert Path(path).parent == tmp_path
    assert ckpt.latest() == (120, STATE)
    assert Checkpointer(tmp_path, serializer=serializer).latest() == (120, STATE)  # a new process


def test_save_writes_a_temp_file_syncs_it_then_renames(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src: str, dst: str) -> None:
        events.append(("replace", f"{Path(src).name} -> {Path(dst).name}"))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    Checkpointer(tmp_path).save(7, STATE)

    [(op1, temp), (op2, rename), (op3, directory)] = events
    assert op1 == "fsync" and Path(temp).parent == tmp_path and Path(temp).name.startswith(".ckpt-")
    assert (op2, rename) == ("replace", f"{Path(temp).name} -> ckpt-000000000007.pkl")
    assert (op3, directory) == ("fsync", str(tmp_path))  # the rename made durable


def test_a_failed_save_leaves_the_previous_checkpoint_and_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ckpt = Checkpointer(tmp_path)
    ckpt.save(1, {"v": 1})

    def disk_full(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", disk_full)
    with pytest.raises(OSError):
        ckpt.save(2, {"v": 2})

    assert sorted(os.listdir(tmp_path)) == ["ckpt-000000000001.pkl"]
    assert ckpt.latest() == (1, {"v": 1})


def test_keep_last(tmp_path: Path) -> None:
    ckpt = Checkpointer(tmp_path, keep_last=3)
    for step in (10, 20, 30, 40, 50):
        ckpt.save(step, {"step": step})
    assert ckpt.checkpoints() == [30, 40, 50]
    assert sorted(os.listdir(tmp_path)) == [f"ckpt-{s:012d}.pkl" for s in (30, 40, 50)]


def test_latest_ignores_temp_and_unreadable_files(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    ckpt = Checkpointer(tmp_path, keep_last=5)
    ckpt.save(100, {"good": True})
    # A writer killed mid-save leaves a temp file; a crash on a filesystem that lost the data
    # leaves a truncated file under a final name; other files are not ours.
    (tmp_path / ".ckpt-abc123.tmp").write_bytes(b"\x80\x05partial")
    (tmp_path / "ckpt-000000000300.pkl").write_bytes(b"\x80\x05\x95trunc")
    (tmp_path / "ckpt-000000000400.json").write_text('{"step": 400, "sta')
    (tmp_path / "ckpt-000000000500.pkl.partial").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("hello")

    with caplog.at_level(logging.WARNING):
        assert ckpt.latest() == (100, {"good": True})
    assert "ckpt-000000000400.json" in caplog.text and "ckpt-000000000300.pkl" in caplog.text


def test_a_checkpoint_whose_content_disagrees_with_its_name_is_skipped(tmp_path: Path) -> None:
    ckpt = Checkpointer(tmp_path, serializer="json")
    ckpt.save(5, "five")
    (tmp_path / "ckpt-000000000009.json").write_text(json.dumps({"step": 8, "state": "eight"}))
    (tmp_path / "ckpt-000000000010.json").write_text(json.dumps(["not", "a", "checkpoint"]))
    assert ckpt.latest() == (5, "five")


def test_save_prunes_old_temp_files_only(tmp_path: Path) -> None:
    old = tmp_path / ".ckpt-old.tmp"
    young = tmp_path / ".ckpt-young.tmp"  # may belong to a writer still at work
    old.write_bytes(b"x")
    young.write_bytes(b"x")
    two_hours_ago = time.time() - 7200
    os.utime(old, (two_hours_ago, two_hours_ago))

    Checkpointer(tmp_path).save(1, {})

    assert not old.exists() and young.exists()


def test_save_async_snapshots_the_state_and_writes_in_the_background(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ckpt = Checkpointer(tmp_path)
    release = threading.Event()
    writing = threading.Event()
    real_fsync = os.fsync

    def slow_fsync(fd: int) -> None:
        if threading.current_thread().name == "tidepool-ckpt-save":
            writing.set()
            assert release.wait(20)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", slow_fsync)
    state = {"weights": [1.0, 2.0]}

    ckpt.save_async(10, state)  # returns while the write is blocked
    state["weights"][0] = 99.0  # the caller may change its state at once
    assert writing.wait(20)
    assert ckpt.latest() is None  # nothing visible until the rename
    reporter = threading.Thread(target=ckpt.report, args=(11,))
    reporter.start()
    reporter.join(20)
    assert not reporter.is_alive()  # progress reports do not wait for the write

    second_returned = threading.Event()

    def second_save() -> None:
        ckpt.save_async(20, {"weights": [3.0]})
        second_returned.set()

    thread = threading.Thread(target=second_save)
    thread.start()
    assert not second_returned.wait(0.2)  # one save in flight: the next one waits for it

    release.set()
    thread.join(20)
    ckpt.wait()
    assert ckpt.checkpoints() == [10, 20]
    assert ckpt.latest() == (20, {"weights": [3.0]})
    assert Checkpointer(tmp_path).latest() == (20, {"weights": [3.0]})
    os.remove(tmp_path / "ckpt-000000000020.pkl")
    assert ckpt.latest() == (10, {"weights": [1.0, 2.0]})


def test_an_async_save_error_is_raised_by_wait(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ckpt = Checkpointer(tmp_path)

    def broken(src: str, dst: str) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "replace", broken)
    ckpt.save_async(1, {})
    with pytest.raises(OSError, match="Input/output error"):
        ckpt.wait()
    ckpt.wait()  # reported once


def test_sigterm_only_sets_the_stop_flag(tmp_path: Path) -> None:
    ckpt = Checkpointer(tmp_path)
    previous = signal.getsignal(signal.SIGTERM)
    try:
        ckpt.install_sigterm_handler()
        assert not ckpt.should_stop()
        os.kill(os.getpid(), signal.SIGTERM)
        deadline = time.monotonic() + 20
        while not ckpt.should_stop() and time.monotonic() < deadline:
            time.sleep(0.01)  # the handler runs in the main thread between bytecodes
        assert ckpt.should_stop()
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert ckpt.checkpoints() == []  # saving is the training loop's job, at a step boundary


def test_request_stop(tmp_path: Path) -> None:
    ckpt = Checkpointer(tmp_path)
    ckpt.request_stop()
    assert ckpt.should_stop()


def test_progress_file_follows_reports_saves_and_resume(tmp_path: Path) -> None:
    progress_path = tmp_path / "progress" / "pod.json"
    ckpt = Checkpointer(tmp_path / "ckpt", progress_path=progress_path)
    assert ckpt.resume() is None
    before = time.time()

    ckpt.report(5)
    first = json.loads(progress_path.read_text())
    assert first["step"] == 5
    assert first["last_checkpoint_step"] is None and first["resumed_from_step"] is None
    assert before <= first["updated_at"] <= time.time()

    ckpt.report(10)
    ckpt.save(10, {"w": 1})
    ckpt.report(13)
    after_save = read_progress(str(progress_path))  # what the node worker reads
    assert after_save is not None
    assert (after_save.step, after_save.last_checkpoint_step, after_save.resumed_from_step) == (13, 10, None)
    assert (
        after_save.last_checkpoint_at is not None and before <= after_save.last_checkpoint_at <= time.time()
    )
    assert after_save.steps_since_checkpoint == 3

    # The next attempt of the pod resumes from the checkpoint at step 10.
    resumed = Checkpointer(tmp_path / "ckpt", progress_path=progress_path)
    assert resumed.resume() == (10, {"w": 1})
    report = read_progress(str(progress_path))
    assert report is not None
    assert (report.step, report.last_checkpoint_step, report.resumed_from_step) == (10, 10, 10)
    assert report.last_checkpoint_at == after_save.last_checkpoint_at
    assert [p for p in os.listdir(progress_path.parent) if p != "pod.json"] == []  # no temp files left


def test_defaults_come_from_the_pod_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIDEPOOL_CHECKPOINT_DIR", str(tmp_path / "from-env"))
    monkeypatch.setenv("TIDEPOOL_PROGRESS_FILE", str(tmp_path / "progress.json"))
    ckpt = Checkpointer()
    ckpt.save(3, "x")
    assert os.listdir(tmp_path / "from-env") == ["ckpt-000000000003.pkl"]
    assert json.loads((tmp_path / "progress.json").read_text())["last_checkpoint_step"] == 3


def test_no_progress_file_without_a_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TIDEPOOL_PROGRESS_FILE", raising=False)
    ckpt = Checkpointer(tmp_path)
    ckpt.report(1)
    ckpt.save(1, {})
    assert os.listdir(tmp_path) == ["ckpt-000000000001.pkl"]


@pytest.mark.parametrize(
    "kwargs",
    [{"keep_last": 0}, {"serializer": "yaml"}],
)
def test_bad_arguments(tmp_path: Path, kwargs: dict) -> None:
    with pytest.raises(ValueError):
        Checkpointer(tmp_path, **kwargs)


def test_a_directory_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TIDEPOOL_CHECKPOINT_DIR", raising=False)
    with pytest.raises(ValueError, match="TIDEPOOL_CHECKPOINT_DIR"):
        Checkpointer()


@pytest.mark.parametrize("step", [-1, 1.5, True, "3"])
def test_bad_steps_are_refused(tmp_path: Path, step: object) -> None:
    with pytest.raises(ValueError):
        Checkpointer(tmp_path).save(step, {})  # type: ignore[arg-type]
