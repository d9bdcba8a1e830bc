"""What to do when a pod's command could not find its program or file: the hint in its failure reason.

A first job's command (`python examples/train_linear.py`, `./train.sh`) names a path relative to a
working directory the user has never seen, and the shell's "can't open file" or "not found" says
nothing about where that is. `exit_hint` reads the end of the pod's log and, for those few messages,
says where the command ran and how to give it code. Plain Python, no Django.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

LOG_TAIL_BYTES = 8192
REASON_MAX = 300  # Pod.reason's length; the job's failure reason is "pod <label> failed: " + it

# python: can't open file '/x/work/examples/train_linear.py': [Errno 2] No such file or directory
_CANT_OPEN = re.compile(r"can't open file '([^']+)'")
# dash: "/bin/sh: 1: foo: not found"; bash: "sh: line 1: foo: command not found"
_NOT_FOUND = re.compile(r"^(?:\S*sh|tidepool-pod): (?:line )?\d+: (?:exec: )?(.+?): (?:command )?not found$", re.M)
_NO_SUCH = re.compile(r"^(?:\S*sh|tidepool-pod): (?:line )?\d+: (?:exec: )?(.+?): No such file or directory$", re.M)
_NOT_EXECUTABLE = re.compile(r"^(?:\S*sh|tidepool-pod): (?:line )?\d+: (?:exec: )?(.+?): Permission denied$", re.M)
_CANT_CD = re.compile(r"^(?:\S*sh|tidepool-pod): (?:line )?\d+: cd: (?:can't cd to )?(.+?)(?:: No such file or directory)?$",
                      re.M)


@dataclass(frozen=True)
class WorkPlace:
    """Where a pod's command ran, as the hint names it."""

    workdir: str
    own_code: bool  # the job's code_mount (else: the job's own empty default directory)
    code_root: str  # where a code_mount may point: the workspace's data root
    examples: bool = False  # the checkout's examples/ is linked into the workdir (embedded default)


def read_log_tail(path: str, size: int = LOG_TAIL_BYTES) -> str:
    """The last `size` bytes of a pod's log, '' when it cannot be read."""
    try:
        with open(path, "rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - size))
            return log.read().decode(errors="replace")
    except OSError:
        return ""


def _tail(path: str, parts: int) -> str:
    """`path` as its last `parts` components, for a reason that would not fit otherwise."""
    pieces = path.rstrip(os.sep).split(os.sep)
    return path if len(pieces) <= parts + 1 else "…/" + "/".join(pieces[-parts:])


def _places(place: WorkPlace) -> list[tuple[str, str, str]]:
    """(working directory, code root, examples note), from the fullest to the shortest form."""
    note = "; examples/ is there" if place.examples else ""
    return [(place.workdir, place.code_root, note), (place.workdir, place.code_root, ""),
            (_tail(place.workdir, 3), _tail(place.code_root, 2), "")]


def _missing(what: str, place: WorkPlace, budget: int) -> str:
    kind = "its code_mount" if place.own_code else "new and empty"
    for workdir, code_root, note in _places(place):
        text = (f"{what} is not in the job's working directory {workdir} ({kind}): use an absolute path, or copy "
                f"your code under {code_root}/ and set that directory as code_mount{note}")
        if len(text) <= budget:
            break
    return text


def exit_hint(exit_code: int, log_tail: str, place: WorkPlace, budget: int = REASON_MAX - 20) -> str:
    """'' unless the log shows the command could not find or run its program or file; then what
    happened, where it ran and what to do, in one line of at most about `budget` characters (the
    paths are shortened to their last components when the full ones do not fit)."""
    if exit_code not in (1, 2, 126, 127):
        return ""
    if match := _CANT_OPEN.search(log_tail):
        missing = match.group(1)
        shown = os.path.relpath(missing, place.workdir) if missing.startswith(place.workdir + os.sep) else missing
        return _missing(shown, place, budget)
    if exit_code == 127 and (match := _NOT_FOUND.search(log_tail) or _NO_SUCH.search(log_tail)):
        program = match.group(1)
        if "/" in program:
            return _missing(program, place, budget)
        also = " (try python3)" if program == "python" else ""
        return (f"{program} is not a program on the pod's PATH{also}: name it by its full path, or as ./{program} "
                f"if it is part of your code (in the job's working directory {_tail(place.workdir, 3)})")
    if exit_code == 126 and (match := _NOT_EXECUTABLE.search(log_tail)):
        program = match.group(1)
        return f"{program} is not executable: chmod +x it, or run it with its interpreter (sh {program}, python3 {program})"
    if exit_code == 2 and (match := _CANT_CD.search(log_tail)):
        return _missing(f"cd {match.group(1)}: that directory", place, budget)
    return ""


def reason_with_hint(reason: str, hint: str) -> str:
    """`reason` ("exit code 2") with the hint after it, within Pod.reason's length."""
    if not hint:
        return reason
    text = f"{reason}: {hint}"
    return text if len(text) <= REASON_MAX else text[: REASON_MAX - 1] + "…"
