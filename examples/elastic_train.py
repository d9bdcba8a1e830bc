"""A tiny model trained by every pod of an elastic job under a bare `torchrun` (DESIGN §2c).

    torchrun examples/elastic_train.py --step-sleep 0.1        # in each pod; the PET_* variables do the rest

Tidepool gives an elastic job's pods torchrun's elastic rendezvous (`PET_NNODES=min:max`, c10d, one id per
job, the store on rank 0's pod, which no shrink takes away), so the world grows and shrinks with the job:
every membership change stops every worker and starts them again in a world of the new size. This script
makes that cost one checkpoint's worth of work at most:

- every worker builds the same model (a Linear(8, 1) regression on synthetic data drawn from `--seed`);
  group rank 0 loads the latest checkpoint of `$TIDEPOOL_CHECKPOINT_DIR` (`tidepool_ckpt`) and broadcasts
  the step and the weights, so a pod that just joined needs no file of its own;
- step k's minibatch is drawn from (seed, k) alone and split over the ranks; the gradient is summed over
  the world with `all_reduce` (gloo), so the same steps give the same weights whatever the world's size;
- group rank 0 saves a checkpoint every `--checkpoint-every` steps; on SIGTERM (torchrun's agent stops
  its workers so for every resize, Tidepool's agent for a stop) each worker finishes its step and rank 0
  saves at that step, so a growth loses no step at all;
- a worker whose peer vanished (a shrink took that pod) says so and exits 1; torchrun's agent then forms
  the smaller world (this needs restarts of torchrun's own: Tidepool sets `PET_MAX_RESTARTS` for elastic
  jobs, `docs/runtime.md`);
- each step prints `step N world W rank R loss L` and reports progress to `$TIDEPOOL_PROGRESS_FILE`.

Outside Tidepool: `--checkpoint-dir /tmp/ckpt` and e.g. `torchrun --nnodes=1:2 --rdzv-backend=c10d
--rdzv-endpoint=127.0.0.1:29411 --max-restarts=10 examples/elastic_train.py --checkpoint-dir /tmp/ckpt`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path
from typing import NoReturn

# torch warns on import where numpy is missing; this script needs none (it broadcasts tensors only).
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

try:
    from tidepool_ckpt import Checkpointer
except ImportError:  # run from a checkout: the package sits next to examples/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tidepool_ckpt import Checkpointer

FEATURES = 8
PEER_LOST = 1  # exit status when a peer vanished: torchrun's agent re-forms the world


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1_000_000, help="train this many steps in all, then exit 0")
    parser.add_argument("--batch", type=int, default=64, help="the global minibatch, split over the ranks")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint-every", type=int, default=10)
    parser.add_argument("--checkpoint-dir", default=None, help="default: $TIDEPOOL_CHECKPOINT_DIR")
    parser.add_argument("--step-sleep", type=float, default=0.0, help="seconds to wait after each step (demos)")
    return parser.parse_args(argv)


def true_model(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(FEATURES, 1, generator=generator), torch.randn(1, generator=generator)


def minibatch(seed: int, step: int, size: int, truth: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, ...]:
    # Depends on (seed, step) only: never on the world's size nor on how often the job was resized.
    generator = torch.Generator().manual_seed(seed * 1_000_003 + step)
    xs = torch.randn(size, FEATURES, generator=generator)
    weights, bias = truth
    ys = xs @ weights + bias + 0.1 * torch.randn(size, 1, generator=generator)
    return xs, ys


def shared_start(checkpointer: Checkpointer, model: torch.nn.Linear, rank: int) -> int:
    """Group rank 0's latest checkpoint, given to every rank (as tensors: torch's object broadcast needs
    numpy): the step to start from."""
    header = torch.zeros(2, dtype=torch.int64)  # (has a checkpoint, its step)
    if rank == 0:
        latest = checkpointer.resume()
        if latest is not None:
            header[0], header[1] = 1, latest[0]
            model.load_state_dict(latest[1])
    dist.broadcast(header, src=0)
    if header[0]:
        with torch.no_grad():
            for parameter in model.parameters():
                dist.broadcast(parameter.data, src=0)
    return int(header[1])


def train_step(model: torch.nn.Linear, xs: torch.Tensor, ys: torch.Tensor, batch: int, lr: float) -> float:
    """One SGD step on the whole minibatch: each rank's share of the summed loss, all-reduced."""
    model.zero_grad()
    loss = ((model(xs) - ys) ** 2).sum()
    loss.backward()
    for parameter in model.parameters():
        dist.all_reduce(parameter.grad, op=dist.ReduceOp.SUM)
    total = loss.detach().clone()
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter -= lr * parameter.grad / batch
    return float(total) / batch


def leave(checkpointer: Checkpointer, status: int) -> NoReturn:
    """Exit now, once every checkpoint asked for is on disk. Not through the interpreter's teardown: with its
    peers gone, torch 2.13's gloo process group lingers there or aborts ("terminate called without an
    active exception"), and torchrun's agent waits for this exit before it forms the new world (or, in a
    shrunk pod, before it exits and frees the pod's GPUs)."""
    checkpointer.wait()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    checkpointer = Checkpointer(args.checkpoint_dir)
    checkpointer.install_sigterm_handler()
    torch.manual_seed(args.seed)
    model = torch.nn.Linear(FEATURES, 1)
    truth = true_model(args.seed)
    step = shared_start(checkpointer, model, rank)
    restarts = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    print(f"world {world} formed: rank {rank}, starting at step {step} (torchrun restart {restarts})", flush=True)
    while step < args.steps:
        if checkpointer.should_stop():
            if rank == 0:
                checkpointer.save(step, model.state_dict())
                print(f"stop requested: checkpoint saved at step {step}", flush=True)
            leave(checkpointer, 0)
        xs, ys = minibatch(args.seed, step, args.batch, truth)
        try:
            loss = train_step(model, xs[rank::world], ys[rank::world], args.batch, args.lr)
        except RuntimeError as error:  # gloo's "Connection closed by peer" and the like
            if checkpointer.should_stop():
                leave(checkpointer, 0)
            print(f"a peer left the world at step {step} ({str(error).splitlines()[0][:120]}): "
                  "exiting so that torchrun forms the new one", flush=True)
            leave(checkpointer, PEER_LOST)
        step += 1
        print(f"step {step} world {world} rank {rank} loss {loss:.6f}", flush=True)
        checkpointer.report(step)
        if rank == 0 and step % args.checkpoint_every == 0:
            checkpointer.save_async(step, {k: v.clone() for k, v in model.state_dict().items()})
        if args.step_sleep:
            time.sleep(args.step_sleep)
    if rank == 0:
        checkpointer.save(step, model.state_dict())
    checkpointer.wait()
    dist.destroy_process_group()
    print(f"done: {step} steps, world {world}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
