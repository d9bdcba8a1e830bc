"""What keeps a pod apart from the node worker and from other jobs (pure Python, no Django).

- **Environment from nothing**: a pod sees the job's variables, Tidepool's documented ones and the
  few variables of the worker's environment an allow-list names (PATH, LANG, ...): never
  SECRET_KEY, DATABASE_URL, REDIS_URL or anything else the worker was started with.
- **Its own user**: with a pod user set, the pod's processes run as that user (setuid/setgid in
  the child before exec, which needs a root worker); without one they run as the worker's user.
- **Its own directories**: created 0700 and owned by the pod's user, under roots the operator
  sets, component by component, refusing any symlink on the way (a pod must not make the worker
  chown something else by planting a link).
- **An exit file**: the pod's shell writes its exit status next to its log when the command ends,
  so a worker that was down when the pod exited reads the real status back (`read_exit_file`).
"""

from __future__ import annotations

import fcntl
import ipaddress
import os
import pwd
import socket
import stat
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scheduler.node.runtime.process import PodSpec

# The outer shell of every pod: runs the command in an inner shell ($1), then writes its exit
# status to the exit file ($2). SIGTERM only sets a flag here, so the outer shell waits for the
# inner one (which waits for its program) and still writes the file; a trapped signal is reset
# to the default in children, so the program sees SIGTERM as usual. Only SIGKILL of the outer
# shell leaves no file.
POD_WRAPPER = (
    "trap 'tp_term=1' TERM\n"
    '/bin/sh -c "$1"\n'
    "tp_status=$?\n"
    "printf '%s\\n' \"$tp_status\" > \"$2\"\n"
    'exit "$tp_status"\n'
)


@dataclass(frozen=True)
class PodUser:
    name: str
    uid: int
    gid: int
    home: str


def resolve_pod_user(name: str) -> PodUser | None:
    """The user pods run as; None (empty name): this process's user.

    Raises OSError for an unknown user, or for another user when this process is not root.
    """
    if not name:
        return None
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise OSError(f"pod user {name!r} does not exist on this node (create it: useradd --system {name})") from None
    if os.geteuid() != 0 and entry.pw_uid != os.geteuid():
        raise PermissionError(f"pods run as {name!r}, but only a root worker can switch to another user")
    return PodUser(name=entry.pw_name, uid=entry.pw_uid, gid=entry.pw_gid, home=entry.pw_dir)


def inherited_environment(allow: Iterable[str], source: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables of `source` (default os.environ) that `allow` names; `X*` names a prefix."""
    source = os.environ if source is None else source
    patterns = [pattern for pattern in allow if pattern]
    return {key: value for key, value in source.items() if any(fnmatchcase(key, p) for p in patterns)}


def pod_environment(spec: PodSpec, base: Mapping[str, str] | None = None, home: str | None = None) -> dict[str, str]:
    """The whole environment a pod runs with, built from nothing.

    `base` (default: the variables of this process that `spec.env_allow` names), then the job's
    env, then Tidepool's variables, which win: a job cannot give itself another rank or GPUs.
    HOME is the pod user's home (`home`), else this process's. RANK and WORLD_SIZE count pods
    (nodes for a launcher such as torchrun, which reads them from PET_*: launcher_environment);
    CUDA_VISIBLE_DEVICES is "" for a pod without GPUs, which hides every GPU rather than
    exposing all of them.
    """
    env = dict(inherited_environment(spec.env_allow) if base is None else base)
    env.setdefault("PATH", os.defpath)
    home = home or os.environ.get("HOME")
    if home:
        env["HOME"] = home
    env.update(spec.env)
    env.update(
        {
            "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in spec.gpu_indices),
            # Our indices are NVML's (PCI bus order); CUDA's default order may differ.
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
            "RANK": str(spec.rank),
            "WORLD_SIZE": str(spec.world_size),
            "MASTER_ADDR": spec.master_addr,
            "MASTER_PORT": str(spec.master_port),
            **launcher_environment(spec, spec.master_addr),
            "TIDEPOOL_JOB_ID": str(spec.job_id),
            "TIDEPOOL_JOB_UID": spec.job_uid,
            "TIDEPOOL_POD_ID": str(spec.pod_id),
            "TIDEPOOL_ATTEMPT": str(spec.attempt),
            "TIDEPOOL_CHECKPOINT_DIR": spec.checkpoint_dir,
            "TIDEPOOL_RESTART_COUNT": str(spec.restart_count),
            "TIDEPOOL_PROGRESS_FILE": spec.progress_path,
            "PYTHONUNBUFFERED": "1",  # so `print` lines reach the log as they happen
        }
    )
    return env


SOCKET_IFNAME_VARIABLES = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")


def interface_towards(address: str) -> str | None:
    """The name of this host's interface that traffic to `address` leaves by (the routing table's
    choice, found by connecting a UDP socket: nothing is sent), or None when it cannot be told."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        try:
            ip = ipaddress.ip_address(socket.gethostbyname(address))
        except (OSError, ValueError):
            return None
    if ip.version != 4:
        return None  # SIOCGIFADDR is IPv4's; an IPv6 cluster sets the variables itself
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((str(ip), 9))
            source = probe.getsockname()[0]
    except OSError:
        return None
    for _index, name in socket.if_nameindex():
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as query:
                # SIOCGIFADDR (0x8915): the interface's IPv4 address
                answer = fcntl.ioctl(query.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))
        except OSError:
            continue  # no IPv4 address on it
        if socket.inet_ntoa(answer[20:24]) == source:
            return name
    return None


def interconnect_environment(spec: PodSpec) -> dict[str, str]:
    """For a host-process pod of a job spread over hosts: GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME name
    the interface towards rank 0. Without them gloo binds the address the host name resolves to,
    127.0.1.1 on a stock Debian host, and its peers on other hosts cannot connect. Not for one pod,
    not when rank 0 is this host's loopback, and never over the job's own setting."""
    if spec.world_size < 2 or not spec.master_addr:
        return {}
    try:
        if ipaddress.ip_address(spec.master_addr).is_loopback:
            return {}
    except ValueError:
        pass  # a host name: resolved by interface_towards
    wanted = [name for name in SOCKET_IFNAME_VARIABLES if name not in spec.env]
    interface = interface_towards(spec.master_addr) if wanted else None
    return {name: interface for name in wanted} if interface else {}


def launcher_environment(spec: PodSpec, master_addr: str) -> dict[str, str]:
    """What torchrun and torch.distributed read, for one process per pod: a bare `torchrun
    train.py` in every pod of a job forms the job's gang (node rank = the pod's rank; a static
    rendezvous at rank 0, since the gang is fixed). torchrun's own flags override PET_* (e.g.
    `--nproc_per_node=8` for a pod of 8 GPUs); LOCAL_* and GROUP_/ROLE_* serve a script run
    without a launcher. An elastic job's pods (TIDEPOOL_MIN_PODS and TIDEPOOL_MAX_PODS in the spec's env,
    DESIGN §2c) form one c10d rendezvous instead: `elastic_launcher_environment`."""
    fixed = {
        "PET_NNODES": str(spec.world_size),
        "PET_NODE_RANK": str(spec.rank),
        "PET_NPROC_PER_NODE": "1",
        "PET_MASTER_ADDR": master_addr,
        "PET_MASTER_PORT": str(spec.master_port),
        "PET_RDZV_BACKEND": "static",
        "LOCAL_RANK": "0",
        "LOCAL_WORLD_SIZE": "1",
        "GROUP_RANK": str(spec.rank),
        "GROUP_WORLD_SIZE": str(spec.world_size),
        "ROLE_NAME": "default",  # torchrun's role name for its workers
        "ROLE_RANK": str(spec.rank),
        "ROLE_WORLD_SIZE": str(spec.world_size),
    }
    low, high = spec.env.get("TIDEPOOL_MIN_PODS"), spec.env.get("TIDEPOOL_MAX_PODS")
    if low and high:
        del fixed["PET_NODE_RANK"]  # the rendezvous numbers the nodes
        fixed.update(elastic_launcher_environment(spec, master_addr, low, high))
    return fixed


# torchrun's own restarts for an elastic job's workers: every shrink uses one (the survivors' workers fail
# when a peer vanishes, and the agent forms the smaller world only while it has restarts left); a growth
# mostly none, sometimes one (a worker whose peer's agent stopped it first fails before its own agent
# restarts it). Bounded, so that a script that always fails stops at last instead of looping unseen.
ELASTIC_TORCHRUN_RESTARTS = 1000


def elastic_launcher_environment(spec: PodSpec, master_addr: str, low: str, high: str) -> dict[str, str]:
    """torchrun's elastic rendezvous (DESIGN §2c): between `low` and `high` nodes, c10d, one id per job, the
    store at rank 0's address and port, hosted by rank 0's agent (`is_host`: a base pod, which no shrink
    takes away; without it every agent on rank 0's host tries to host it and the first to start wins — an
    extra pod, whose shrink would end the job). torch 2.13's agent deadlocks when a node joins a running
    world unless the rendezvous keeps its own TCP store (TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1,
    pytorch#147064); last_call_timeout=5 lets a shrunk world go on after 5 s instead of waiting 30 s for
    stragglers (issue 24: 19.8-21.3 s to train again after a shrink, 43 s with the defaults). A shrunk pod's
    agent never leaves the round it was in: the survivors' next round waits until its heartbeats are
    missed, 5 × 1 s here instead of torch's 3 × 5 s (measured: 23.4 s → 13.6 s from the SIGTERM to the
    smaller world training, 4 agents on 2 busy cores). A shrink costs the survivors one of torchrun's
    restarts (ELASTIC_TORCHRUN_RESTARTS)."""
    return {
        "PET_NNODES": f"{low}:{high}",
        "PET_RDZV_BACKEND": "c10d",
        "PET_RDZV_ID": spec.job_uid,
        "PET_RDZV_ENDPOINT": f"{master_addr}:{spec.master_port}",
        "PET_RDZV_CONF": f"last_call_timeout=5,keep_alive_interval=1,keep_alive_max_attempt=5,"
                         f"is_host={1 if spec.rank == 0 else 0}",
        "PET_MAX_RESTARTS": str(ELASTIC_TORCHRUN_RESTARTS),
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
    }


def prepare_pod_dirs(spec: PodSpec, user: PodUser | None) -> None:
    """A pod's directories before it starts, in either runtime: the operator-rooted ones (`spec.dirs`)
    made for the pod's user, then its work, checkpoint, log and progress directories."""
    for root, path in spec.dirs:
        prepare_dir(root, path, user)
    for directory in (spec.workdir, spec.checkpoint_dir, os.path.dirname(spec.log_path),
                      os.path.dirname(spec.progress_path)):
        if directory:
            os.makedirs(directory, mode=0o700, exist_ok=True)


def prepare_dir(root: str, path: str, user: PodUser | None, mode: int = 0o700) -> None:
    """Create `path` below `root`: missing components get `mode` and the pod user as owner.

    `root` itself (the operator's, e.g. TIDEPOOL_DATA_DIR/pods) is created if missing, owned by
    this process. Raises OSError when `path` is not inside `root` or a component is a symlink
    or not a directory.
    """
    root = os.path.normpath(os.path.abspath(root))
    path = os.path.normpath(os.path.abspath(path))
    if path != root and not path.startswith(root + os.sep):
        raise OSError(f"{path} is not inside {root}")
    os.makedirs(root, exist_ok=True)
    current = root
    for part in os.path.relpath(path, root).split(os.sep) if path != root else []:
        current = os.path.join(current, part)
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            try:
                os.mkdir(current, mode)
            except FileExistsError:  # another pod of the job made it meanwhile
                info = os.lstat(current)
            else:
                os.chmod(current, mode)  # mkdir's mode is filtered by the umask
                if user is not None:
                    os.chown(current, user.uid, user.gid, follow_symlinks=False)
                continue
        if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
            raise OSError(f"{current} is a symlink or not a directory: refused")


def own_file(path: str, user: PodUser | None, mode: int = 0o600) -> None:
    """Give a file the worker created (the pod's log) to the pod's user."""
    os.chmod(path, mode)
    if user is not None:
        os.chown(path, user.uid, user.gid, follow_symlinks=False)


def read_exit_file(path: str) -> int | None:
    """The exit status a pod's shell wrote when its command ended; None: no (complete) file."""
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            text = f.read(32).strip()
    except OSError:
        return None
    try:
        return int(text)
    except ValueError:  # empty (the shell was killed while writing) or garbage
        return None


def find_pod_processes(markers: Mapping[tuple[int, int], str]) -> dict[tuple[int, int], int]:
    """Process groups of pods still alive: (pod id, attempt) → the group leader's pid.

    `markers` maps each (pod id, attempt) to its job's uid; a process counts only when its
    environment carries all three (TIDEPOOL_JOB_UID, TIDEPOOL_POD_ID, TIDEPOOL_ATTEMPT) and it
    leads its group, so a pod of another database or a recycled pid is never taken for ours.
    """
    wanted = {
        (f"TIDEPOOL_JOB_UID={uid}".encode(), f"TIDEPOOL_POD_ID={pod_id}".encode(),
         f"TIDEPOOL_ATTEMPT={attempt}".encode()): (pod_id, attempt)
        for (pod_id, attempt), uid in markers.items()
    }
    found: dict[tuple[int, int], int] = {}
    if not wanted:
        return found
    try:
        entries = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return found
    for name in entries:
        pid = int(name)
        try:
            if os.getpgid(pid) != pid:
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = set(f.read().split(b"\0"))
            with open(f"/proc/{pid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[-1].split()[0]
        except OSError:
            continue
        if state in (b"Z", b"X"):
            continue
        for marker, key in wanted.items():
            if all(item in environ for item in marker):
                found[key] = pid
                break
    return found
