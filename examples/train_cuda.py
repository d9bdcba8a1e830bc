"""A small PyTorch training job on the GPU Tidepool gives it, that survives preemption.

A two-layer MLP learns a fixed random teacher network by SGD on synthetic data. The minibatch of
step k is drawn on the CPU from a generator seeded with (seed, k) alone and only then moved to the
device, so a run that is preempted, saves (step, model, optimizer) and resumes sees exactly the
batches an uninterrupted run sees: on the CPU the two end with the same weights, bit for bit.

    python examples/train_cuda.py --steps 2000 --hidden 4096 --batch 4096 \
        --checkpoint-dir /tmp/ckpt --output /tmp/result.json

`--device auto` (the default) takes the first GPU of the pod's CUDA_VISIBLE_DEVICES when CUDA is
usable and the CPU otherwise; `--device cuda` refuses to fall back. On Tidepool the checkpoint
directory and progress file come from TIDEPOOL_CHECKPOINT_DIR and TIDEPOOL_PROGRESS_FILE. On SIGTERM
the script finishes the step it is in, saves a checkpoint at that step and exits with status 0;
started again, it prints "resumed from step N" and carries on.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

try:
    from tidepool_ckpt import Checkpointer
except ImportError:  # run from a checkout: the package sits next to examples/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tidepool_ckpt import Checkpointer

FEATURES = 64


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--checkpoint-every", type=int, default=100)
    parser.add_argument("--hidden", type=int, default=256, help="width of the hidden layer")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--step-sleep", type=float, default=0.0, help="seconds to sleep after each step (demos)")
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    parser.add_argument("--checkpoint-dir", help="default: $TIDEPOOL_CHECKPOINT_DIR")
    parser.add_argument("--output", help="where to write the final result (JSON); default: stdout")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.checkpoint_every < 1 or args.hidden < 1 or args.batch < 1:
        parser.error("--steps, --checkpoint-every, --hidden and --batch must be at least 1")
    return args


def pick_device(choice: str) -> torch.device:
    if choice == "cpu":
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda", 0)  # the first of the pod's CUDA_VISIBLE_DEVICES
    if choice == "cuda":
        raise SystemExit("--device cuda: CUDA is not usable here (no GPU in CUDA_VISIBLE_DEVICES, or no driver)")
    return torch.device("cpu")


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def build_model(hidden: int, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 1))


def teacher(seed: int) -> torch.Tensor:
    return torch.randn(FEATURES, 1, generator=torch.Generator().manual_seed(seed + 1_000_003)) / FEATURES**0.5


def batch(seed: int, step: int, size: int, weights: torch.Tensor, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Step `step`'s minibatch, from (seed, step) alone: the same after any resume."""
    generator = torch.Generator().manual_seed(seed * 1_000_003 + step)
    x = torch.randn(size, FEATURES, generator=generator)
    y = torch.tanh(x @ weights)
    return x.to(device), y.to(device)


def cpu_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """What a checkpoint holds: tensors on the CPU, so that a resume on another device loads it."""
    return {
        "model": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "optimizer": optimizer.state_dict(),
    }


def weights_digest(model: torch.nn.Module) -> str:
    """A hash of every parameter's bytes: equal digests, bit-identical weights."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(bytes(tensor.detach().cpu().reshape(-1).view(torch.uint8).tolist()))
    return digest.hexdigest()


def train(args: argparse.Namespace) -> dict[str, Any]:
    device = pick_device(args.device)
    ckpt = Checkpointer(args.checkpoint_dir)
    ckpt.install_sigterm_handler()
    model = build_model(args.hidden, args.seed).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    weights = teacher(args.seed)
    print(f"training on {device} ({device_name(device)})", flush=True)

    step = 0
    resumed = ckpt.resume()
    if resumed is not None:
        step, state = resumed
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])  # moves the momentum to the parameters' device
        print(f"resumed from step {step}", flush=True)

    started = time.monotonic()
    first_step = step
    loss: torch.Tensor | None = None  # none when this run had no step left to train
    while step < args.steps:
        x, y = batch(args.seed, step, args.batch, weights, device)
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        step += 1
        ckpt.report(step)
        if ckpt.should_stop():
            ckpt.save(step, cpu_state(model, optimizer))
            print(f"checkpoint saved at step {step}, exiting", flush=True)
            raise SystemExit(0)
        if step % args.checkpoint_every == 0:
            ckpt.save_async(step, cpu_state(model, optimizer))
            print(f"step {step} loss {loss.item():.6f}", flush=True)
        if args.step_sleep:
            time.sleep(args.step_sleep)
    ckpt.wait()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elapsed = time.monotonic() - started
    return {
        "steps": step,
        "loss": loss.item() if loss is not None else None,
        "device": device_name(device),
        "steps_this_run": step - first_step,
        "steps_per_s_this_run": round((step - first_step) / elapsed, 1) if elapsed > 0 else None,
        "weights_sha256": weights_digest(model),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    result = train(args)
    text = json.dumps(result)
    if args.output:
        Path(args.output).write_text(text)
    else:
        print(text)
    print(f"done: {result['steps']} steps, loss {result['loss']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
