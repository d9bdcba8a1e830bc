"""Linear regression by minibatch SGD in plain Python, that survives preemption.

The data set is synthetic, drawn from `--seed`; the minibatch of step k is drawn from
(seed, k) alone. So a run that is preempted, saves (step, weights) and resumes computes
exactly the same floats as a run that was never interrupted.

    python examples/train_linear.py --steps 2000 --checkpoint-every 100 --step-sleep 0.01 \
        --checkpoint-dir /tmp/ckpt --output /tmp/result.json

On Tidepool the checkpoint directory and progress file come from TIDEPOOL_CHECKPOINT_DIR and
TIDEPOOL_PROGRESS_FILE. On SIGTERM the script saves a checkpoint at the step it reached and
exits with status 0; started again, it prints "resumed from step N" and carries on.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

try:
    from tidepool_ckpt import Checkpointer
except ImportError:  # run from a checkout: the package sits next to examples/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tidepool_ckpt import Checkpointer

FEATURES = 8
SAMPLES = 512

Dataset = tuple[list[list[float]], list[float]]
State = dict[str, Any]  # {"weights": [float] * FEATURES, "bias": float}


def make_dataset(seed: int) -> Dataset:
    """y = x·w* + b* + noise, with w* and b* drawn from the seed as well."""
    rng = random.Random(seed)
    true_w = [rng.uniform(-2.0, 2.0) for _ in range(FEATURES)]
    true_b = rng.uniform(-1.0, 1.0)
    xs = [[rng.gauss(0.0, 1.0) for _ in range(FEATURES)] for _ in range(SAMPLES)]
    ys = [sum(w * x for w, x in zip(true_w, row, strict=True)) + true_b + rng.gauss(0.0, 0.1) for row in xs]
    return xs, ys


def minibatch(seed: int, step: int, size: int) -> list[int]:
    # Depends on (seed, step) only, never on how many steps this process has run.
    rng = random.Random(seed * 1_000_003 + step)
    return [rng.randrange(SAMPLES) for _ in range(size)]


def sgd_step(state: State, data: Dataset, batch: list[int], lr: float) -> State:
    xs, ys = data
    weights, bias = state["weights"], state["bias"]
    grad_w = [0.0] * FEATURES
    grad_b = 0.0
    for i in batch:
        error = sum(w * x for w, x in zip(weights, xs[i], strict=True)) + bias - ys[i]
        for j in range(FEATURES):
            grad_w[j] += error * xs[i][j]
        grad_b += error
    scale = lr / len(batch)
    return {
        "weights": [w - scale * g for w, g in zip(weights, grad_w, strict=True)],
        "bias": bias - scale * grad_b,
    }


def loss(state: State, data: Dataset) -> float:
    xs, ys = data
    total = 0.0
    for row, y in zip(xs, ys, strict=True):
        error = sum(w * x for w, x in zip(state["weights"], row, strict=True)) + state["bias"] - y
        total += error * error
    return total / len(xs)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--checkpoint-every", type=int, default=100)
    parser.add_argument("--step-sleep", type=float, default=0.0, help="seconds to sleep after each step")
    parser.add_argument("--output", help="where to write the final result (JSON); default: stdout")
    parser.add_argument("--checkpoint-dir", help="default: $TIDEPOOL_CHECKPOINT_DIR")
    parser.add_argument("--keep-last", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.05)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    data = make_dataset(args.seed)
    # JSON checkpoints: readable by eye, and Python floats round-trip through JSON exactly.
    ckpt = Checkpointer(args.checkpoint_dir, keep_last=args.keep_last, serializer="json")
    ckpt.install_sigterm_handler()

    restored = ckpt.resume()
    if restored is not None:
        step, state = restored
        print(f"resumed from step {step}", flush=True)
    else:
        step, state = 0, {"weights": [0.0] * FEATURES, "bias": 0.0}
        print("starting from scratch", flush=True)

    while step < args.steps:
        if ckpt.should_stop():
            ckpt.save(step, state)
            print(f"stop requested: checkpoint saved at step {step}, exiting", flush=True)
            return 0
        state = sgd_step(state, data, minibatch(args.seed, step, args.batch_size), args.lr)
        step += 1
        ckpt.report(step)
        if step % args.checkpoint_every == 0:
            ckpt.save_async(step, state)
            print(f"step {step}: loss {loss(state, data):.6f}, saving a checkpoint", flush=True)
        if args.step_sleep > 0:
            time.sleep(args.step_sleep)

    ckpt.save(step, state)
    result = {"steps": step, "weights": state["weights"], "bias": state["bias"], "loss": loss(state, data)}
    text = json.dumps(result, indent=2)
    if args.output:
        Path(args.output).write_text(text + "\n", encoding="utf-8")
    else:
        print(text)
    print(f"done: {step} steps, loss {result['loss']:.6f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
