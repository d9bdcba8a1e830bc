"""Reading the progress file a pod writes (TIDEPOOL_PROGRESS_FILE).

The checkpoint helper (`tidepool_ckpt.Checkpointer.report`) replaces the file atomically, but
a pod may write it by other means, or be killed half-way through its own writer: anything that
is not a complete, well-formed report reads as None rather than raising.

Format (JSON object; times are epoch seconds, null where not known yet):
    {"step": 1250, "last_checkpoint_step": 1200, "last_checkpoint_at": 1730000000.5,
     "resumed_from_step": 1000, "updated_at": 1730000012.25}
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

# A progress file is a few hundred bytes; refuse to read something that clearly is not one.
_MAX_BYTES = 64 * 1024


@dataclass(frozen=True)
class Progress:
    step: int
    last_checkpoint_step: int | None
    last_checkpoint_at: float | None
    resumed_from_step: int | None
    updated_at: float | None

    @property
    def steps_since_checkpoint(self) -> int:
        """Work that would be lost if the pod died now (all of it without a checkpoint)."""
        return self.step - (self.last_checkpoint_step or 0)


def read_progress(path: str) -> Progress | None:
    """The pod's latest progress report, or None if the file is missing, partial or malformed."""
    try:
        with open(path, "rb") as f:
            raw = f.read(_MAX_BYTES + 1)
    except OSError:
        return None
    if len(raw) > _MAX_BYTES:
        return None
    try:
        data = json.loads(raw)
    except ValueError:  # partial write, not UTF-8, not JSON
        return None
    return progress_from(data)


def progress_from(data: Any) -> Progress | None:
    """A progress report from its JSON object (a file's, or a node's report to the console);
    None when it is not a well-formed one."""
    if not isinstance(data, dict):
        return None
    step = _int(data.get("step"))
    if step is None:
        return None
    return Progress(
        step=step,
        last_checkpoint_step=_int(data.get("last_checkpoint_step")),
        last_checkpoint_at=_time(data.get("last_checkpoint_at")),
        resumed_from_step=_int(data.get("resumed_from_step")),
        updated_at=_time(data.get("updated_at")),
    )


def _int(value: Any) -> int | None:
    # bool is an int subclass; `true` is not a step.
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _time(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None
