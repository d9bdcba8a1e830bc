"""examples/train_linear.py run as real pods: preempted mid-run, restarted, bit-identical result."""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler.node.runtime.process import PodExit, PodSpec, PodSupervisor, TerminateResult
from scheduler.node.runtime.progress import read_progress
from tidepool_ckpt import Checkpointer

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "train_linear.py"
STEPS = 1000
TIMEOUT_S = 30.0  # generous: only reached when something is wrong


def processes_mentioning(text: str) -> list[int]:
    """Live (not zombie) processes whose command line contains `text`."""
    found = []
    for name in os.listdir("/proc"):
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
            state = Path(f"/proc/{name}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):  # not a process, or gone meanwhile
            continue
        if text.encode() in cmdline and state not in (b"Z", b"X"):
            found.append(int(name))
    return found


@pytest.fixture
def supervisor(tmp_path: Path) -> Iterator[PodSupervisor]:
    sup = PodSupervisor()
    yield sup
    sup.shutdown(grace_s=1)
    # Every pod's command line names its output file under tmp_path.
    assert processes_mentioning(str(tmp_path)) == [], "a training process was left behind"


def training_pod(tmp_path: Path, pod_id: int, attempt: int, step_sleep: float) -> PodSpec:
    pod_dir = tmp_path / f"pod-{pod_id}"
    command = shlex.join(
        [sys.executable, str(SCRIPT), "--steps", str(STEPS), "--checkpoint-every", "25", "--seed", "3",
         "--step-sleep", str(step_sleep), "--output", str(pod_dir / "result.json")]
    )  # fmt: skip
    return PodSpec(
        pod_id=pod_id,
        job_id=pod_id,
        attempt=attempt,
        command=command,
        env={},
        gpu_indices=(),
        rank=0,
        world_size=1,
        master_addr="127.0.0.1",
        master_port=29500,
        checkpoint_dir=str(pod_dir / "checkpoints"),  # shared by the attempts of the pod
        restart_count=attempt - 1,
        workdir=str(pod_dir / "work"),
        log_path=str(pod_dir / f"attempt-{attempt}.log"),
        progress_path=str(pod_dir / f"attempt-{attempt}.progress.json"),
    )


def wait_exit(sup: PodSupervisor, spec: PodSpec) -> PodExit:
    result = sup.wait(spec.pod_id, spec.attempt, timeout=TIMEOUT_S)
    assert result is not None, f"{spec.log_path}:\n{Path(spec.log_path).read_text()}"
    return result


def test_a_preempted_run_resumes_and_ends_with_the_same_weights(
    tmp_path: Path, supervisor: PodSupervisor
) -> None:
    uninterrupted = training_pod(tmp_path, pod_id=1, attempt=1, step_sleep=0)
    first = training_pod(tmp_path, pod_id=2, attempt=1, step_sleep=0.01)
    supervisor.start(uninterrupted)
    supervisor.start(first)

    # Preempt the second run once it is well past its first periodic checkpoint (step 25); it
    # would need 10 s to finish.
    deadline = time.monotonic() + TIMEOUT_S
    while (progress := read_progress(first.progress_path)) is None or progress.step < 60:
        assert time.monotonic() < deadline, "the training pod made no progress"
        time.sleep(0.01)
    terminated_at = time.monotonic()
    assert supervisor.terminate(2, 1, grace_s=10) == TerminateResult.TERMINATING
    preempted = wait_exit(supervisor, first)

    assert time.monotonic() - terminated_at < 10  # saved and left within the grace period
    assert (preempted.outcome, preempted.exit_code, preempted.killed) == ("preempted", 0, False)
    saved = Checkpointer(first.checkpoint_dir).latest()
    assert saved is not None
    saved_step = saved[0]
    assert 60 <= saved_step < STEPS
    final_progress = read_progress(first.progress_path)
    assert final_progress is not None
    # Saved at the step it had reached when SIGTERM came: no work lost.
    assert final_progress.step == final_progress.last_checkpoint_step == saved_step
    assert f"checkpoint saved at step {saved_step}, exiting" in Path(first.log_path).read_text()
    assert not (tmp_path / "pod-2" / "result.json").exists()

    second = training_pod(tmp_path, pod_id=2, attempt=2, step_sleep=0)
    supervisor.start(second)
    assert wait_exit(supervisor, second).outcome == "succeeded"
    assert wait_exit(supervisor, uninterrupted).outcome == "succeeded"

    assert f"resumed from step {saved_step}\n" in Path(second.log_path).read_text()
    resumed_progress = read_progress(second.progress_path)
    assert resumed_progress is not None
    assert (resumed_progress.resumed_from_step, resumed_progress.step) == (saved_step, STEPS)

    expected = json.loads((tmp_path / "pod-1" / "result.json").read_text())
    result = json.loads((tmp_path / "pod-2" / "result.json").read_text())
    assert result["steps"] == expected["steps"] == STEPS
    assert result == expected  # float equality: bit-identical weights, bias and loss
