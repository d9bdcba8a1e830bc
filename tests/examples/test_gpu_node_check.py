"""scripts/gpu_node_check.py in its CPU mode (CI has no GPU): examples/train_cuda.py as a pod of the worker's
PodSupervisor, preempted with SIGTERM, resumed from its checkpoint, ending with the weights of a run that was
never interrupted. On a GPU node the same script also checks NVML (docs/operations.md has its output)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler.node.runtime.gpus import detect_gpus

pytest.importorskip("torch", reason="needs torch in the venv: .venv/bin/pip install torch==2.13.0")

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "scripts" / "gpu_node_check.py"
TRAIN = ROOT / "examples" / "train_cuda.py"
TIMEOUT_S = 240  # generous: two shared cores, three PyTorch processes; only reached when something is wrong


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=TIMEOUT_S, cwd=ROOT)


def test_the_check_preempts_and_resumes_the_training_pod_bit_for_bit(tmp_path: Path) -> None:
    check = run(str(CHECK), "--cpu")  # as docs/operations.md gives it
    assert check.returncode == 0, check.stdout + check.stderr
    summary = json.loads(check.stdout.strip().splitlines()[-1])
    pod_dir = Path(summary["dir"])  # a new temporary directory
    try:
        check_summary(summary, pod_dir, tmp_path)
    finally:
        shutil.rmtree(pod_dir, ignore_errors=True)


def check_summary(summary: dict, pod_dir: Path, tmp_path: Path) -> None:
    assert summary["ok"] is True and summary["steps"] == 400
    preemption, resumed = summary["preemption"], summary["resumed"]
    # SIGTERM, then a save at the step reached, exit 0 well inside the 30 s grace period, nothing killed.
    assert (preemption["outcome"], preemption["exit_code"], preemption["killed"]) == ("preempted", 0, False)
    assert preemption["sigterm_to_exit_s"] < 30
    assert 150 <= preemption["saved_step"] < 400
    assert (resumed["from_step"], resumed["steps"]) == (preemption["saved_step"], 400)
    assert resumed["steps_this_run"] == 400 - preemption["saved_step"]
    assert f"resumed from step {preemption['saved_step']}\n" in (pod_dir / "attempt-2.log").read_text()

    # The same job never interrupted: the same weights, bit for bit.
    whole = tmp_path / "whole.json"
    plain = run(str(TRAIN), "--steps", "400", "--hidden", "64", "--batch", "64", "--device", "cpu",
                "--checkpoint-dir", str(tmp_path / "whole-ckpt"), "--output", str(whole))  # fmt: skip
    assert plain.returncode == 0, plain.stderr
    resumed_result = json.loads((pod_dir / "result.json").read_text())
    assert resumed_result["weights_sha256"] == json.loads(whole.read_text())["weights_sha256"]

    # Started again with nothing left to train, it trains nothing and claims no loss.
    again = run(str(TRAIN), "--steps", "400", "--hidden", "64", "--batch", "64", "--device", "cpu",
                "--checkpoint-dir", str(tmp_path / "whole-ckpt"), "--output", str(whole))  # fmt: skip
    assert again.returncode == 0 and "resumed from step 400\n" in again.stdout, again.stderr
    assert json.loads(whole.read_text())["loss"] is None and json.loads(whole.read_text())["steps_this_run"] == 0


def test_the_check_refuses_a_directory_an_earlier_check_used(tmp_path: Path) -> None:
    (tmp_path / "attempt-1.progress.json").write_text('{"step": 4000}')
    check = run(str(CHECK), "--cpu", "--dir", str(tmp_path))
    assert check.returncode == 2
    assert "is not empty: give a new or empty directory" in check.stdout


@pytest.mark.skipif(detect_gpus() is not None, reason="this machine has GPUs: the check would run on them")
def test_without_gpus_the_check_says_so_and_how_to_check_the_rest(tmp_path: Path) -> None:
    check = run(str(CHECK), "--dir", str(tmp_path / "check"))
    assert check.returncode == 1
    assert "NVML found no GPUs" in check.stdout and "--cpu checks the rest" in check.stdout
    assert not (tmp_path / "check" / "attempt-1.log").exists()  # no pod was started
