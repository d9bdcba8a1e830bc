"""examples/elastic_train.py under a real torchrun: the same steps give the same weights whatever the world's
size, and a world of another size resumes from the checkpoint another one saved (what a resize does)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tidepool_ckpt import Checkpointer

torch = pytest.importorskip("torch", reason="needs torch in the venv: .venv/bin/pip install torch==2.13.0")

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "elastic_train.py"
TORCHRUN = Path(sys.executable).parent / "torchrun"
TIMEOUT_S = 120  # generous: two cores shared with others; only reached when something is wrong


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _world(nodes: int, steps: int, checkpoint_dir: Path) -> list[str]:
    """`nodes` torchrun agents in one c10d rendezvous, as an elastic job's pods run it; their logs."""
    port = _free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("TIDEPOOL_PROGRESS_FILE", None)
    command = [str(TORCHRUN), f"--nnodes={nodes}", "--nproc-per-node=1", "--rdzv-backend=c10d",
               f"--rdzv-endpoint=127.0.0.1:{port}", f"--rdzv-id=test-{port}", str(SCRIPT),
               "--steps", str(steps), "--checkpoint-every", "3", "--checkpoint-dir", str(checkpoint_dir)]
    agents = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
              for _ in range(nodes)]
    logs = []
    for agent in agents:
        output, _ = agent.communicate(timeout=TIMEOUT_S)
        assert agent.returncode == 0, output
        logs.append(output)
    return logs


def _weights(checkpoint_dir: Path) -> tuple[int, list[float]]:
    step, state = Checkpointer(checkpoint_dir, progress_path=os.devnull).latest()
    return step, [float(v) for tensor in state.values() for v in tensor.flatten()]


@pytest.mark.skipif(not TORCHRUN.exists(), reason=f"needs torchrun in the venv ({TORCHRUN})")
def test_a_resized_world_resumes_and_matches_one_that_never_was(tmp_path: Path) -> None:
    two = tmp_path / "two"
    logs = _world(2, 8, two)
    assert all("world 2 formed" in log and "step 8 world 2" in log for log in logs), logs

    one = tmp_path / "one"
    _world(1, 4, one)  # stopped after 4 steps...
    log = _world(1, 8, one)[0]  # ...and resumed by a world of another size
    assert "starting at step 4" in log and "step 5 world 1" in log and "step 4 world" not in log, log

    step_two, weights_two = _weights(two)
    step_one, weights_one = _weights(one)
    assert step_two == step_one == 8
    assert weights_one == pytest.approx(weights_two, rel=1e-5, abs=1e-6)  # float sums in another order only
