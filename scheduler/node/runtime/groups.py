"""A pod's process group on the host: who is left in it, and signalling it (pure Python)."""

from __future__ import annotations

import logging
import os

log = logging.getLogger("scheduler.node.runtime.process")


def live_group_members(pgid: int) -> list[int] | None:
    """Pids of the processes in group `pgid` that have not exited (zombies excluded).

    None where /proc is unavailable (not Linux): the caller cannot tell.
    """
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    members = []
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # exited meanwhile, or not ours to read
            continue
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) >= 3 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            members.append(int(name))
    return members


def signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:  # the group is already empty
        pass
    except PermissionError:  # a member changed its credentials (setuid); nothing more we can do
        log.warning("could not send signal %s to process group %s", sig, pgid)
