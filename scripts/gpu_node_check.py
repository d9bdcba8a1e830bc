"""Check a GPU node the way its node worker uses it: NVML inventory, utilisation sampling, and a CUDA
training pod that is preempted (SIGTERM, grace period) and resumes from its checkpoint.

    python scripts/gpu_node_check.py                # on a GPU node, with PyTorch and nvidia-ml-py
    python scripts/gpu_node_check.py --cpu          # anywhere: the same pod lifecycle on the CPU

It runs no Django and needs no database: it calls what the worker calls (`detect_gpus` when it
registers, `sample_gpus` on every heartbeat) and runs the pod through the worker's `PodSupervisor`
(host processes), with `examples/train_cuda.py` as the job. Each step prints a line; the last line is
a JSON summary. Exit status 0 when every check held, 1 with the reason otherwise, 2 for bad arguments. docs/operations.md
says what it printed on a real H200.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scheduler.node.runtime.gpus import detect_gpus, sample_gpus  # noqa: E402
from scheduler.node.runtime.process import PodExit, PodSpec, PodSupervisor  # noqa: E402
from scheduler.node.runtime.progress import read_progress  # noqa: E402
from tidepool_ckpt import Checkpointer  # noqa: E402

TRAIN = ROOT / "examples" / "train_cuda.py"
# The job's environment passes these through where they are set: a node image may find the NVIDIA
# driver's libraries only through LD_LIBRARY_PATH, which the pod sandbox does not pass by default.
PASSED_THROUGH = ("LD_LIBRARY_PATH",)


NO_GPUS = "NVML found no GPUs (python -m scheduler.node.runtime.gpus says why); --cpu checks the rest"


class CheckFailed(Exception):
    pass


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu", action="store_true", help="no GPU needed: train on the CPU, skip NVML checks")
    parser.add_argument("--steps", type=int, help="training steps in all (default 3000; --cpu: 400)")
    parser.add_argument("--hidden", type=int, default=8192, help="hidden width (GPU); --cpu uses 64")
    parser.add_argument("--batch", type=int, default=8192, help="minibatch (GPU); --cpu uses 64")
    parser.add_argument("--preempt-at-step", type=int, help="preempt once the pod reports this step (default 1000; --cpu: 150)")
    parser.add_argument("--grace", type=float, default=30.0, help="seconds between SIGTERM and SIGKILL")
    parser.add_argument("--sample-every", type=float, default=0.5, help="seconds between NVML samples")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds any one wait may take")
    parser.add_argument("--dir", help="a new or empty directory for the pod's files (default: a new temporary one)")
    args = parser.parse_args(argv)
    if args.steps is None:
        args.steps = 400 if args.cpu else 3000
    if args.preempt_at_step is None:
        args.preempt_at_step = 150 if args.cpu else 1000
    if not 0 < args.preempt_at_step < args.steps:
        parser.error("--preempt-at-step must be above 0 and below --steps")
    if args.cpu:
        args.hidden, args.batch = min(args.hidden, 64), min(args.batch, 64)
    return args


def say(text: str) -> None:
    print(text, flush=True)


def pod_spec(args: argparse.Namespace, root: Path, attempt: int, gpu_indices: tuple[int, ...]) -> PodSpec:
    command = shlex.join([
        sys.executable, str(TRAIN), "--steps", str(args.steps), "--checkpoint-every", "200",
        "--hidden", str(args.hidden), "--batch", str(args.batch), "--device", "cpu" if args.cpu else "cuda",
        "--output", str(root / "result.json"),
        *(["--step-sleep", "0.01"] if args.cpu else []),  # a small model on a CPU: slow it down to be caught mid-run
    ])  # fmt: skip
    return PodSpec(
        pod_id=1, job_id=1, attempt=attempt, command=command,
        env={name: os.environ[name] for name in PASSED_THROUGH if os.environ.get(name)},
        gpu_indices=gpu_indices, rank=0, world_size=1, master_addr="127.0.0.1", master_port=29500,
        checkpoint_dir=str(root / "checkpoints"), restart_count=attempt - 1, workdir=str(root / "work"),
        log_path=str(root / f"attempt-{attempt}.log"), progress_path=str(root / f"attempt-{attempt}.progress.json"),
    )  # fmt: skip


def wait_exit(supervisor: PodSupervisor, spec: PodSpec, timeout: float) -> PodExit:
    result = supervisor.wait(spec.pod_id, spec.attempt, timeout=timeout)
    if result is None:
        raise CheckFailed(f"attempt {spec.attempt} did not exit within {timeout:g} s; log {spec.log_path}")
    return result


def summarise(samples: list[dict[str, Any]]) -> dict[str, Any]:
    if not samples:
        return {"samples": 0}
    busy = [s["utilization_percent"] for s in samples]
    return {
        "samples": len(samples),
        "utilization_percent_max": max(busy),
        "utilization_percent_median": sorted(busy)[len(busy) // 2],
        "memory_used_mib_max": max(s["memory_used_mib"] for s in samples),
        "memory_total_mib": samples[0]["memory_total_mib"],
    }


def run_until_step(
    args: argparse.Namespace, supervisor: PodSupervisor, spec: PodSpec, indices: list[int]
) -> list[dict[str, Any]]:
    """Sample the pod's GPU (as the worker's heartbeat does) from its first step to the preemption step."""
    samples: list[dict[str, Any]] = []
    deadline = time.monotonic() + args.timeout
    next_sample = 0.0
    while (progress := read_progress(spec.progress_path)) is None or progress.step < args.preempt_at_step:
        if not any(p.attempt == spec.attempt for p in supervisor.running()):
            raise CheckFailed(f"the pod ended before step {args.preempt_at_step}:\n{Path(spec.log_path).read_text()}")
        if time.monotonic() > deadline:
            raise CheckFailed(f"no step {args.preempt_at_step} within {args.timeout:g} s; log {spec.log_path}")
        # From the first step on: training, not importing torch or starting CUDA.
        if progress is not None and progress.step > 0 and time.monotonic() >= next_sample:
            samples += sample_gpus(indices)
            next_sample = time.monotonic() + args.sample_every
        time.sleep(0.02)
    return samples


def check(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    summary: dict[str, Any] = {"dir": str(root), "steps": args.steps}
    inventory = detect_gpus()
    if inventory is None and not args.cpu:
        raise CheckFailed(NO_GPUS)
    if inventory is not None:
        say(f"inventory (detect_gpus, as the worker registers it): {json.dumps(inventory.to_dict())}")
        summary["inventory"] = {k: v for k, v in inventory.to_dict().items() if k != "devices"}
    indices = [] if args.cpu or inventory is None else [inventory.gpu_indices[0]]
    idle = sample_gpus(indices) if indices else []
    say(f"idle sample (sample_gpus): {json.dumps(idle)}")
    summary["idle_sample"] = idle

    supervisor = PodSupervisor()
    try:
        first = pod_spec(args, root, attempt=1, gpu_indices=tuple(indices))
        supervisor.start(first)
        started = time.monotonic()
        samples = run_until_step(args, supervisor, first, indices)
        summary["busy"] = summarise(samples)
        say(f"training pod at step {args.preempt_at_step} after {time.monotonic() - started:.1f} s; "
            f"NVML samples while it trained: {json.dumps(summary['busy'])}")
        sigterm_at = time.monotonic()
        supervisor.terminate(first.pod_id, first.attempt, grace_s=args.grace)
        preempted = wait_exit(supervisor, first, args.grace + 30)
        exit_s = time.monotonic() - sigterm_at
        saved = Checkpointer(first.checkpoint_dir, progress_path=os.devnull).latest()
        saved_step = saved[0] if saved else None
        summary["preemption"] = {"outcome": preempted.outcome, "exit_code": preempted.exit_code,
                                 "killed": preempted.killed, "sigterm_to_exit_s": round(exit_s, 2),
                                 "saved_step": saved_step}  # fmt: skip
        say(f"preempted: {json.dumps(summary['preemption'])}")
        if preempted.outcome != "preempted" or preempted.killed or preempted.exit_code != 0:
            raise CheckFailed(f"the pod did not save and leave within the grace period:\n{Path(first.log_path).read_text()}")
        if saved_step is None or saved_step < args.preempt_at_step:
            raise CheckFailed(f"no checkpoint at or after step {args.preempt_at_step} (latest: {saved_step})")

        second = pod_spec(args, root, attempt=2, gpu_indices=tuple(indices))
        supervisor.start(second)
        finished = wait_exit(supervisor, second, args.timeout)
        log = Path(second.log_path).read_text()
        if finished.outcome != "succeeded":
            raise CheckFailed(f"the resumed pod ended {finished.outcome} ({finished.exit_code}):\n{log}")
        if f"resumed from step {saved_step}\n" not in log:
            raise CheckFailed(f"the second attempt did not resume from step {saved_step}:\n{log}")
        result = json.loads((root / "result.json").read_text())
        summary["resumed"] = {"from_step": saved_step, **{k: result[k] for k in
                              ("steps", "loss", "device", "steps_this_run", "steps_per_s_this_run")}}  # fmt: skip
        say(f"resumed and finished: {json.dumps(summary['resumed'])}")
        if result["steps"] != args.steps or result["steps_this_run"] != args.steps - saved_step:
            raise CheckFailed(f"the resumed run did {result['steps_this_run']} steps, not {args.steps - saved_step}")
        if result["loss"] is not None and not math.isfinite(result["loss"]):
            raise CheckFailed(f"the training diverged (loss {result['loss']}): try a smaller --hidden")
        if not args.cpu and (not samples or max(s["utilization_percent"] for s in samples) == 0):
            raise CheckFailed("NVML read no utilisation while the pod trained on the GPU")
    finally:
        supervisor.shutdown(grace_s=1)
    return summary


def new_check_dir(given: str | None, prefix: str) -> Path | None:
    """`--dir`, made if need be, or a new temporary directory; None (and why, said) for a directory in use."""
    root = Path(given) if given else Path(tempfile.mkdtemp(prefix=prefix))
    if root.exists() and any(root.iterdir()):  # an earlier check's progress and checkpoints would be read
        say(f"--dir {root} is not empty: give a new or empty directory (an earlier check's files would be read)")
        return None
    root.mkdir(parents=True, exist_ok=True)
    return root.resolve()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    root = new_check_dir(args.dir, "tidepool-gpu-check-")
    if root is None:
        return 2
    try:
        summary = check(args, root)
    except CheckFailed as failure:
        say(f"FAILED: {failure}")
        return 1
    say(json.dumps({"ok": True, **summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
