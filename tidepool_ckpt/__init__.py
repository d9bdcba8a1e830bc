"""tidepool_ckpt: checkpoints for training code that runs on Tidepool (standard library only).

Save atomically, keep the last N, save when preempted (SIGTERM), resume from the latest, and
report progress to the node worker. See `Checkpointer` and docs/runtime.md.
"""

from tidepool_ckpt.checkpointer import ENV_CHECKPOINT_DIR, ENV_PROGRESS_FILE, Checkpointer

__all__ = ["ENV_CHECKPOINT_DIR", "ENV_PROGRESS_FILE", "Checkpointer"]
