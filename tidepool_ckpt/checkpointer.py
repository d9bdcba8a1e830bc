"""Checkpoints that survive preemption: atomic saves, keep-last-N, save on SIGTERM, resume.

Typical training loop (see examples/train_linear.py):

    ckpt = Checkpointer()                      # directory from TIDEPOOL_CHECKPOINT_DIR
    ckpt.install_sigterm_handler()             # SIGTERM only sets a flag
    restored = ckpt.resume()                   # (step, state) or None
    step, state = restored or (0, initial_state())
    while step < total_steps:
        state = train_one_step(state, step)
        step += 1
        ckpt.report(step)                      # progress file for the console
        if step % every == 0:
            ckpt.save_async(step, state)
        if ckpt.should_stop():                 # preempted or stopped: save now and leave
            ckpt.save(step, state)
            sys.exit(0)

Why a flag and not a save inside the signal handler: Python runs handlers between two bytecodes
of the main thread, possibly in the middle of updating the state, so a save from the handler
could write a half-updated step. The loop saves at a step boundary instead, within the grace
period the scheduler allows (30 s by default). Exit 0 after that save: the scheduler already
knows the pod was preempted or stopped and records it as such, whatever the exit status.

Files in the directory: `ckpt-<step, 12 digits>.pkl` (or `.json`). A save writes a hidden temp
file in the same directory, fsyncs it, renames it over the final name and fsyncs the directory,
so a checkpoint is either complete or absent, even if the machine loses power; `latest()` only
reads final names, and skips (with a warning) one that cannot be read.

Pickle checkpoints run code when loaded: only load checkpoints your own jobs wrote.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import re
import signal
import tempfile
import threading
import time
from typing import Any, Literal

log = logging.getLogger(__name__)

ENV_CHECKPOINT_DIR = "TIDEPOOL_CHECKPOINT_DIR"
ENV_PROGRESS_FILE = "TIDEPOOL_PROGRESS_FILE"

_EXTENSIONS = {"pickle": "pkl", "json": "json"}
_FINAL_NAME = re.compile(r"^ckpt-(\d+)\.(pkl|json)$")
_TEMP_PREFIX = ".ckpt-"
_TEMP_SUFFIX = ".tmp"
# Temp files older than this are leftovers of a writer that was killed; younger ones may belong
# to a writer still at work (an earlier attempt of the pod that is still exiting).
_STALE_TEMP_S = 3600.0


class Checkpointer:
    """Saves and restores a training state in `directory` (default: $TIDEPOOL_CHECKPOINT_DIR).

    - `keep_last`: how many checkpoints to keep, by step number (the highest are kept).
    - `progress_path`: where `report` writes the progress JSON (default:
      $TIDEPOOL_PROGRESS_FILE); None and no variable: progress is not written.
    - `serializer`: "pickle" (any picklable state) or "json" (JSON-able state; tuples come back
      as lists; floats round-trip exactly).

    Thread-safe; `install_sigterm_handler` must be called from the main thread.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str] | None = None,
        keep_last: int = 3,
        progress_path: str | os.PathLike[str] | None = None,
        serializer: Literal["pickle", "json"] = "pickle",
    ) -> None:
        directory = directory if directory is not None else os.environ.get(ENV_CHECKPOINT_DIR)
        if not directory:
            raise ValueError(f"no checkpoint directory: pass one or set {ENV_CHECKPOINT_DIR}")
        if keep_last < 1:
            raise ValueError("keep_last must be at least 1")
        if serializer not in _EXTENSIONS:
            raise ValueError(f"serializer must be one of {sorted(_EXTENSIONS)}")
        self.directory = os.fspath(directory)
        self.keep_last = keep_last
        self.serializer = serializer
        if progress_path is None:
            progress_path = os.environ.get(ENV_PROGRESS_FILE) or None
        self.progress_path = os.fspath(progress_path) if progress_path is not None else None
        os.makedirs(self.directory, exist_ok=True)
        if self.progress_path is not None:
            os.makedirs(os.path.dirname(os.path.abspath(self.progress_path)), exist_ok=True)

        self._stop_requested = threading.Event()
        self._lock = threading.Lock()  # progress fields and the progress file
        self._write_lock = threading.Lock()  # checkpoint files: one writer at a time
        self._async_lock = threading.RLock()  # the one save_async in flight
        self._pending: threading.Thread | None = None
        self._pending_error: BaseException | None = None
        self._step: int | None = None
        self._last_checkpoint_step: int | None = None
        self._last_checkpoint_at: float | None = None
        self._resumed_from_step: int | None = None

    # -- saving ---------------------------------------------------------------------------

    def save(self, step: int, state: Any) -> str:
        """Write a checkpoint of `state` at `step` durably; returns its path.

        Waits for a save_async still in flight first, so checkpoints land in call order.
        """
        self.wait()
        return self._write(step, *self._serialize(step, state))

    def save_async(self, step: int, state: Any) -> None:
        """Like `save`, but the disk work happens in a background thread.

        The state is serialized before this returns, so the caller may change it right away.
        One save is in flight at a time: a later call (or `save`) first waits for the earlier
        one to finish, so every checkpoint asked for is written, in order, and training only
        waits when writing is slower than the checkpoint interval. An error in the background
        is raised by the next `save_async`, `save` or `wait`.
        """
        with self._async_lock:
            self.wait()
            data, saved_at = self._serialize(step, state)
            thread = threading.Thread(
                target=self._write_in_background, args=(step, data, saved_at), name="tidepool-ckpt-save"
            )
            # Not a daemon: if training returns while a save is in flight, the interpreter waits
            # for the checkpoint instead of dropping it.
            self._pending = thread
            thread.start()

    def wait(self) -> None:
        """Block until the save_async in flight (if any) is on disk; raise its error if it failed."""
        with self._async_lock:
            thread, self._pending = self._pending, None
            if thread is not None:
                thread.join()
            error, self._pending_error = self._pending_error, None
        if error is not None:
            raise error

    def _write_in_background(self, step: int, data: bytes, saved_at: float) -> None:
        try:
            self._write(step, data, saved_at)
        except BaseException as exc:  # handed to the training thread by wait()
            self._pending_error = exc

    def _serialize(self, step: int, state: Any) -> tuple[bytes, float]:
        """The file's bytes, and the time the state was taken (the checkpoint's time)."""
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"step must be a non-negative int, not {step!r}")
        saved_at = time.time()
        payload = {"step": step, "saved_at": saved_at, "state": state}
        if self.serializer == "json":
            return json.dumps(payload).encode(), saved_at
        return pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL), saved_at

    def _write(self, step: int, data: bytes, saved_at: float) -> str:
        final = self._path(step)
        # Not under self._lock: report() must not wait for a background save's fsync.
        with self._write_lock:
            fd, temp = tempfile.mkstemp(prefix=_TEMP_PREFIX, suffix=_TEMP_SUFFIX, dir=self.directory)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(temp, final)
            except BaseException:
                _remove(temp)
                raise
            # The rename itself is only durable once the directory entry is on disk.
            _fsync_directory(self.directory)
            self._prune()
        with self._lock:
            self._last_checkpoint_step = step
            self._last_checkpoint_at = saved_at
            self._step = max(step, self._step or 0)
            self._write_progress()
        log.debug("checkpoint saved: %s", final)
        return final

    def _path(self, step: int) -> str:
        return os.path.join(self.directory, f"ckpt-{step:012d}.{_EXTENSIONS[self.serializer]}")

    def _prune(self) -> None:
        for _, path in self._checkpoints()[: -self.keep_last]:
            _remove(path)
        now = time.time()
        for name in os.listdir(self.directory):
            if name.startswith(_TEMP_PREFIX) and name.endswith(_TEMP_SUFFIX):
                path = os.path.join(self.directory, name)
                try:
                    if now - os.path.getmtime(path) > _STALE_TEMP_S:
                        _remove(path)
                except OSError:
                    pass

    # -- restoring ------------------------------------------------------------------------

    def checkpoints(self) -> list[int]:
        """Steps of the checkpoints on disk, oldest first."""
        return [step for step, _ in self._checkpoints()]

    def _checkpoints(self) -> list[tuple[int, str]]:
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        found = []
        for name in names:
            match = _FINAL_NAME.match(name)
            if match:
                found.append((int(match.group(1)), os.path.join(self.directory, name)))
        return sorted(found)

    def latest(self) -> tuple[int, Any] | None:
        """The newest readable checkpoint as (step, state); None if there is none."""
        payload = self._latest_payload()
        return (payload["step"], payload["state"]) if payload is not None else None

    def resume(self) -> tuple[int, Any] | None:
        """`latest()`, also recorded in the progress file as the step this run resumed from."""
        payload = self._latest_payload()
        with self._lock:
            if payload is not None:
                self._resumed_from_step = payload["step"]
                self._last_checkpoint_step = payload["step"]
                self._last_checkpoint_at = payload.get("saved_at")
                self._step = payload["step"]
            self._write_progress()
        return (payload["step"], payload["state"]) if payload is not None else None

    def _latest_payload(self) -> dict[str, Any] | None:
        for step, path in reversed(self._checkpoints()):
            try:
                with open(path, "rb") as f:
                    raw = f.read()
                payload = json.loads(raw) if path.endswith(".json") else pickle.loads(raw)
            except Exception as exc:  # truncated by a crash on a non-durable filesystem, etc.
                log.warning("skipping unreadable checkpoint %s: %s", path, exc)
                continue
            if not isinstance(payload, dict) or payload.get("step") != step or "state" not in payload:
                log.warning("skipping malformed checkpoint %s", path)
                continue
            return payload
        return None

    # -- preemption -----------------------------------------------------------------------

    def install_sigterm_handler(self, signals: tuple[int, ...] = (signal.SIGTERM,)) -> None:
        """On SIGTERM (or `signals`), only set the flag that `should_stop()` reads.

        Replaces any previous handler of those signals. Call from the main thread.
        """
        for sig in signals:
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum: int, frame: object) -> None:
        self._stop_requested.set()

    def request_stop(self) -> None:
        """What SIGTERM does: ask the training loop to save and exit."""
        self._stop_requested.set()

    def should_stop(self) -> bool:
        """True once SIGTERM arrived: save with `save(step, state)` and exit (status 0)."""
        return self._stop_requested.is_set()

    # -- progress -------------------------------------------------------------------------

    def report(self, step: int) -> None:
        """Record that `step` steps are done, in the progress file (no-op without one)."""
        with self._lock:
            self._step = step
            self._write_progress()

    def progress(self) -> dict[str, Any]:
        """The progress report as written to the progress file."""
        with self._lock:
            return self._progress()

    def _progress(self) -> dict[str, Any]:
        return {
            "step": self._step if self._step is not None else 0,
            "last_checkpoint_step": self._last_checkpoint_step,
            "last_checkpoint_at": self._last_checkpoint_at,
            "resumed_from_step": self._resumed_from_step,
            "updated_at": time.time(),
        }

    def _write_progress(self) -> None:
        # Lock held. Replaced atomically so readers never see half a file; no fsync: a report
        # lost in a power cut costs nothing, and fsync on every step would slow training down.
        if self.progress_path is None:
            return
        temp = f"{self.progress_path}.{os.getpid()}.tmp"
        try:
            with open(temp, "w", encoding="utf-8") as f:
                json.dump(self._progress(), f)
            os.replace(temp, self.progress_path)
        except OSError as exc:  # progress is advisory: never let it break training
            log.warning("could not write progress to %s: %s", self.progress_path, exc)
            _remove(temp)


def _fsync_directory(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some filesystems cannot fsync a directory; the rename still happened
        pass
    finally:
        os.close(fd)


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
