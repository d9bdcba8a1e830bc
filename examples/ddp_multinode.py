"""pytorch/examples' DDP tutorial, multi-node part (distributed/ddp-tutorial-series/multinode.py),
written again for Tidepool's pods: one process per pod under a bare `torchrun`.

    torchrun examples/ddp_multinode.py 50 10          # total_epochs save_every [--batch_size 32]

torchrun reads the number of nodes, this node's rank and the rendezvous address from the PET_*
variables every pod gets, so the command names none of them. Each process reads LOCAL_RANK and RANK
from its environment (torchrun sets them), trains a Linear(20, 1) on 2,048 random samples with
DistributedDataParallel, and rank 0 saves a snapshot ({"MODEL_STATE", "EPOCHS_RUN"}) every
`save_every` epochs. Started again after a preemption, every rank loads that snapshot and prints
"Resuming training from snapshot at Epoch N", then trains from epoch N on.

What differs from the tutorial, and nothing else:
- backend gloo on CPU instead of NCCL on GPUs: no torch.cuda.set_device, the model stays on the CPU,
  DDP gets no device_ids, the snapshot is loaded with map_location="cpu", batches are not moved;
- the snapshot lives in the job's checkpoint directory, $TIDEPOOL_CHECKPOINT_DIR/snapshot.pt (the
  tutorial's snapshot.pt in the working directory where that variable is unset), so a later attempt
  of the job, on any node, finds it;
- the tutorial's datautils.MyTrainDataset is in this file, so that the example is one file.

On Tidepool's torch image (`bin/build-pod-image --with-torch`) it is
/opt/tidepool/examples/ddp_multinode.py; docs/runtime.md runs it as a 2-pod job.
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.nn.functional as F
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class MyTrainDataset(Dataset):
    """datautils.py's data set: `size` random (20 features, 1 target) pairs."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.data = [(torch.rand(20), torch.rand(1)) for _ in range(size)]

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.data[index]


def ddp_setup() -> None:
    init_process_group(backend="gloo")


class Trainer:
    def __init__(
        self,
        model: torch.nn.Module,
        train_data: DataLoader,
        optimizer: torch.optim.Optimizer,
        save_every: int,
        snapshot_path: str,
    ) -> None:
        self.local_rank = int(os.environ["LOCAL_RANK"])
        self.global_rank = int(os.environ["RANK"])
        self.model = model
        self.train_data = train_data
        self.optimizer = optimizer
        self.save_every = save_every
        self.epochs_run = 0
        self.snapshot_path = snapshot_path
        if os.path.exists(snapshot_path):
            print("Loading snapshot")
            self._load_snapshot(snapshot_path)

        self.model = DDP(self.model)

    def _load_snapshot(self, snapshot_path: str) -> None:
        snapshot = torch.load(snapshot_path, map_location="cpu")
        self.model.load_state_dict(snapshot["MODEL_STATE"])
        self.epochs_run = snapshot["EPOCHS_RUN"]
        print(f"Resuming training from snapshot at Epoch {self.epochs_run}")

    def _run_batch(self, source: torch.Tensor, targets: torch.Tensor) -> None:
        self.optimizer.zero_grad()
        output = self.model(source)
        loss = F.cross_entropy(output, targets)
        loss.backward()
        self.optimizer.step()

    def _run_epoch(self, epoch: int) -> None:
        b_sz = len(next(iter(self.train_data))[0])
        print(f"[GPU{self.global_rank}] Epoch {epoch} | Batchsize: {b_sz} | Steps: {len(self.train_data)}")
        self.train_data.sampler.set_epoch(epoch)
        for source, targets in self.train_data:
            self._run_batch(source, targets)

    def _save_snapshot(self, epoch: int) -> None:
        snapshot = {
            "MODEL_STATE": self.model.module.state_dict(),
            "EPOCHS_RUN": epoch,
        }
        torch.save(snapshot, self.snapshot_path)
        print(f"Epoch {epoch} | Training snapshot saved at {self.snapshot_path}")

    def train(self, max_epochs: int) -> None:
        for epoch in range(self.epochs_run, max_epochs):
            self._run_epoch(epoch)
            if self.global_rank == 0 and epoch % self.save_every == 0:
                self._save_snapshot(epoch)


def load_train_objs() -> tuple[Dataset, torch.nn.Module, torch.optim.Optimizer]:
    train_set = MyTrainDataset(2048)  # load your dataset
    model = torch.nn.Linear(20, 1)  # load your model
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    return train_set, model, optimizer


def prepare_dataloader(dataset: Dataset, batch_size: int) -> DataLoader:
    return DataLoader(
        dataset,
        batch_size=batch_size,
        pin_memory=True,
        shuffle=False,
        sampler=DistributedSampler(dataset),
    )


def default_snapshot_path() -> str:
    """The job's checkpoint directory on Tidepool, the working directory elsewhere (the tutorial's)."""
    checkpoint_dir = os.environ.get("TIDEPOOL_CHECKPOINT_DIR")
    return os.path.join(checkpoint_dir, "snapshot.pt") if checkpoint_dir else "snapshot.pt"


def main(save_every: int, total_epochs: int, batch_size: int, snapshot_path: str | None = None) -> None:
    ddp_setup()
    dataset, model, optimizer = load_train_objs()
    train_data = prepare_dataloader(dataset, batch_size)
    trainer = Trainer(model, train_data, optimizer, save_every, snapshot_path or default_snapshot_path())
    trainer.train(total_epochs)
    destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="simple distributed training job")
    parser.add_argument("total_epochs", type=int, help="Total epochs to train the model")
    parser.add_argument("save_every", type=int, help="How often to save a snapshot")
    parser.add_argument("--batch_size", default=32, type=int, help="Input batch size on each device (default: 32)")
    args = parser.parse_args()

    main(args.save_every, args.total_epochs, args.batch_size)
