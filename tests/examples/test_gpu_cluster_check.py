"""scripts/gpu_cluster_check.py in its CPU mode, as docs/operations.md gives it: a real console, scheduler and
node agent; an idle-resources job of examples/train_cuda.py reclaimed for its quota's owner, Preempted, and
resumed from the checkpoint it saved on SIGTERM, without using a restart. (On a GPU node the same script
registers the node with NVML and reads its GPU samples back from the API: docs/operations.md has its output.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="needs torch in the venv: .venv/bin/pip install torch==2.13.0")

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "scripts" / "gpu_cluster_check.py"


@pytest.mark.skipif(os.environ.get("DATABASE_URL", "").startswith("postgres"),
                    reason="the check runs its own console on SQLite whatever the suite's database: once is enough")  # fmt: skip
def test_an_idle_job_is_reclaimed_for_the_owner_and_resumes_from_its_checkpoint() -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("TIDEPOOL_")}
    check = subprocess.run([sys.executable, str(CHECK), "--cpu"], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=600)  # fmt: skip
    assert check.returncode == 0, check.stdout[-5000:] + check.stderr[-3000:]
    summary = json.loads(check.stdout.strip().splitlines()[-1])
    base = Path(summary["dir"])
    try:
        node, running, preemption, done = (summary[k] for k in ("node", "borrower_running", "preemption",
                                                                "borrower_done"))  # fmt: skip
        # The agent registered the node it declared; the borrower ran on team-vision's idle GPU.
        assert (node["gpu_type"], node["gpu_count"], node["lost"]) == ("A100", 1, False)
        assert running["in_quota"] is False and running["step"] >= 600 and running["gpu_samples"] == 0
        assert ["preempted", "reclaimed for a queued job of quota team-vision"] in preemption["events"]
        # Resumed once, from the step its SIGTERM save reached (at or past the one shown when reclaimed).
        assert (done["attempt"], done["preemptions"], done["restarts"]) == (2, 1, 0)
        assert done["resumed_from_step"] >= preemption["step_reported"] >= 600
        assert ["resumed", f"resumed from step {done['resumed_from_step']}"] in done["events"]
        assert done["events"][-1] == ["succeeded", "all pods exited with code 0"]
        # No pod of its jobs is left (pods outlive their agent by design; the check stops them).
        leftovers = [pid for pid in os.listdir("/proc") if pid.isdigit() and _cmdline_names(pid, str(base))]
        assert leftovers == []
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _cmdline_names(pid: str, text: str) -> bool:
    try:
        return text.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
