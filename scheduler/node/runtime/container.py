"""Pods as containers: `podman run` of the job's image, with the walls of DESIGN §6 (pure Python).

`ContainerSupervisor` has `PodSupervisor`'s interface and bookkeeping (fencing by attempt, each
exit reported once, `wait`, `poll`, `shutdown`); only how a pod is started, signalled and watched
differs. `podman_run_args(spec, config, ...)` is the whole contract with Podman, one pure function:

- the job's image, or the node's default one (`image.py` builds it); `--pull` per the node;
- its environment from nothing (`container_environment`): the job's and Tidepool's variables, none
  of the node worker's (no PATH either: the image's own PATH stands);
- only its own GPUs: the device nodes `/dev/nvidia<i>` of its indices plus the driver's control
  nodes, or CDI `nvidia.com/gpu=<i>` where the NVIDIA toolkit wrote a spec (`gpu_device_args`).
  Inside, the devices are numbered from 0, so CUDA_VISIBLE_DEVICES is `0..n-1` there and
  TIDEPOOL_GPU_INDICES carries the node's indices;
- `--memory`/`--memory-swap` = its `memory_gib` (no swap), `--cpus` = its `cpu`, `--pids-limit`,
  `--shm-size` = its `shared_memory_gib`, `--ulimit nofile/nproc`;
- a read-only image, `/tmp` a tmpfs (charged to its memory), its attempt directory (log, progress,
  exit file), workdir, checkpoint directory and the job's mounts bound at their host paths;
- a non-root user, `no-new-privileges`, every capability dropped, its own pid, ipc and cgroup
  namespaces, catatonit as pid 1 (`--init`);
- the job's own network (`network.py`) or none.

Stop and preemption: SIGTERM reaches the pod's init, which hands it to the pod's shell, which sends
it to every process of the pod (`kill -TERM -1` inside its pid namespace: detached ones too);
`podman stop --time <grace>` then SIGKILLs what is left, and the kernel kills everything in a pid
namespace whose init dies. The exit is reported only once `podman rm` has removed the container,
so no process of the pod is left when its GPUs are handed out again.

Out of memory: Podman's `State.OOMKilled` is used where it works; on cgroup v1 (these machines)
conmon never sets it, so each pod also gets a parent memory cgroup of its own
(`--cgroup-parent`), whose peak usage survives the container: a pod that fails after its peak
reached its limit while the kernel killed something for memory is reported "out of memory
(limit N GiB)".
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import resource
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from scheduler.node.runtime.container_procs import (
    ContainerProcess,
    find_container,
    global_oom_kills,
    memory_limit_bytes,
    podman_available,
)
from scheduler.node.runtime.host_cgroups import limit_text
from scheduler.node.runtime.network import (
    JobNetworks,
    NetworkConfig,
    NetworkError,
    RoutedPods,
    install_pod_firewall,
)
from scheduler.node.runtime.process import (
    SHELL_PREAMBLE,
    PodProcess,
    PodSpec,
    PodSupervisor,
    now_iso,
)
from scheduler.node.runtime.sandbox import (
    PodUser,
    inherited_environment,
    own_file,
    pod_environment,
    prepare_pod_dirs,
    read_exit_file,
    resolve_pod_user,
)

__all__ = ["ContainerConfig", "ContainerSupervisor", "container_environment", "container_name", "gpu_device_args",
           "podman_available", "podman_run_args"]

log = logging.getLogger(__name__)

_GIB = 1024**3
# Device nodes of the NVIDIA driver every GPU process needs besides its own /dev/nvidia<i>.
NVIDIA_CONTROL_DEVICES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")
CDI_DIRS = ("/etc/cdi", "/var/run/cdi")
# Variables of the worker that describe the host's filesystem: meaningless inside an image.
_HOST_ONLY_VARIABLES = ("PATH", "LD_LIBRARY_PATH", "CUDA_HOME", "TMPDIR", "HOME")
# Characters Podman's --mount syntax cannot carry in a path.
_UNSAFE_PATH = re.compile(r"[,:\n\0]")
_PODMAN_TIMEOUT_S = 120.0

# The pod's shell inside the container (pid 2, under catatonit). Output goes to the pod's log ($3,
# bound from the node); the command ($1) runs in an inner shell; on SIGTERM every process of the
# pod gets SIGTERM too (kill -1: all of its pid namespace but init and this shell), so a detached
# (setsid) process cannot miss its last chance to save. The exit status goes to the exit file ($2).
CONTAINER_WRAPPER = (
    'exec >>"$3" 2>&1\n'
    "trap 'tp_term=1; kill -TERM -1 2>/dev/null' TERM\n"
    '/bin/sh -c "$1" &\n'
    "tp_child=$!\n"
    "while :; do\n"
    '  wait "$tp_child"; tp_status=$?\n'
    '  kill -0 "$tp_child" 2>/dev/null || break\n'
    "done\n"
    "printf '%s\\n' \"$tp_status\" > \"$2\"\n"
    'exit "$tp_status"\n'
)


def _own_hard_limit(name: str, ceiling: int) -> int:
    limit = resource.getrlimit(getattr(resource, name))[1]
    return ceiling if limit == resource.RLIM_INFINITY else min(ceiling, limit)


@dataclass(frozen=True)
class ContainerConfig:
    """How this node runs containers (config/settings.py: TIDEPOOL_POD_*)."""

    default_image: str = ""
    podman: str = "podman"
    oci_runtime: str = "runc"  # crun refuses the hybrid cgroup v1 layout of these machines
    cgroup_manager: str = "cgroupfs"
    pull: str = "missing"  # always | missing | never (Podman's --pull)
    uid: int = 65534  # when no TIDEPOOL_POD_USER names a host user: "nobody"
    gid: int = 65534
    pids_limit: int = 4096
    # Raising a limit above the worker's own hard limit fails in runc ("error setting rlimits").
    nofile: int = field(default_factory=lambda: _own_hard_limit("RLIMIT_NOFILE", 65536))
    nproc: int = field(default_factory=lambda: _own_hard_limit("RLIMIT_NPROC", 32768))  # per uid, host-wide
    default_memory_gib: float = 4.0  # for a role that asks no memory
    read_only: bool = True
    network: NetworkConfig = field(default_factory=NetworkConfig)
    dev_root: str = "/dev"
    cdi_dirs: tuple[str, ...] = CDI_DIRS
    cgroup_root: str = "/sys/fs/cgroup"
    cgroup_parent: str = "tidepool"  # per-pod parent cgroups below this (cgroup v1 only)

    def podman_command(self) -> list[str]:
        return [self.podman, "--runtime", self.oci_runtime, "--cgroup-manager", self.cgroup_manager]


def container_name(spec: PodSpec) -> str:
    """Unique per job, attempt and rank; rank 0's name is the job's MASTER_ADDR on its network."""
    job = spec.job_uid or f"job{spec.job_id}"
    return f"tp-{job}-a{spec.attempt}-r{spec.rank}"


def master_container_name(spec: PodSpec) -> str:
    return container_name(replace(spec, rank=0))


def cdi_gpu_spec_present(cdi_dirs: tuple[str, ...] = CDI_DIRS) -> bool:
    """A CDI spec for `nvidia.com/gpu` exists (`nvidia-ctk cdi generate` wrote one)."""
    for directory in cdi_dirs:
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            if not name.endswith((".yaml", ".yml", ".json")):
                continue
            try:
                text = Path(directory, name).read_text(errors="replace")
            except OSError:
                continue
            if "nvidia.com/gpu" in text or re.search(r"kind:\s*['\"]?nvidia\.com/gpu", text):
                return True
    return False


def gpu_device_args(indices: tuple[int, ...], dev_root: str = "/dev", cdi: bool = False) -> list[str]:
    """The --device arguments giving a pod exactly its GPUs and nothing else.

    CDI (`nvidia.com/gpu=<i>`) brings the driver's libraries along; plain device nodes need an
    image that carries a user-space driver matching the node's. No GPU: no device at all. A node whose
    GPUs are declared, not detected (the demo, test beds), has no /dev/nvidia<i>: its pods get no GPU
    device, never another one in its place.
    """
    if not indices:
        return []
    if cdi:
        return [arg for index in indices for arg in ("--device", f"nvidia.com/gpu={index}")]
    args = []
    present = [index for index in indices if os.path.exists(os.path.join(dev_root, f"nvidia{index}"))]
    if not present:
        return []
    for index in present:
        args += ["--device", f"{dev_root}/nvidia{index}"]
    for name in NVIDIA_CONTROL_DEVICES:
        if os.path.exists(os.path.join(dev_root, name)):
            args += ["--device", f"{dev_root}/{name}"]
    return args


def container_environment(spec: PodSpec, master_addr: str | None = None, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """A container pod's whole environment: what the host runtime gives (sandbox.pod_environment)
    without the variables that describe the host's filesystem, with GPU numbers as seen inside."""
    if base is None:
        allow = [pattern for pattern in spec.env_allow if pattern not in _HOST_ONLY_VARIABLES]
        base = inherited_environment(allow)
    env = pod_environment(spec, base=base, home="/tmp")
    if "PATH" not in spec.env and "PATH" not in base:
        env.pop("PATH", None)  # pod_environment's default: the image's PATH must stand
    env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(len(spec.gpu_indices)))
    env["TIDEPOOL_GPU_INDICES"] = ",".join(str(i) for i in spec.gpu_indices)
    if master_addr is not None:
        env["MASTER_ADDR"] = env["PET_MASTER_ADDR"] = master_addr
        if "PET_RDZV_ENDPOINT" in env:  # an elastic job's rendezvous store is rank 0's, on the job's network
            env["PET_RDZV_ENDPOINT"] = f"{master_addr}:{spec.master_port}"
    return env


def _bind_paths(spec: PodSpec) -> list[str]:
    paths = [os.path.dirname(spec.log_path), spec.workdir, spec.checkpoint_dir, *spec.mounts]
    seen: list[str] = []
    for path in paths:
        if not path:
            continue
        path = os.path.normpath(path)
        if _UNSAFE_PATH.search(path):
            raise OSError(f"cannot bind {path!r} into a container: a path with ',' or ':' is refused")
        if path not in seen:
            seen.append(path)
    return sorted(seen, key=len)  # a parent before what is inside it


def podman_run_args(
    spec: PodSpec,
    config: ContainerConfig,
    *,
    user: PodUser,
    network: str,
    cgroup_parent: str | None = None,
    cdi: bool = False,
    master_addr: str | None = None,
    address: str = "",
) -> list[str]:
    """The whole `podman run` command line of one pod (detached; the supervisor waits on it)."""
    if user.uid == 0:
        raise OSError("pods never run as root in a container: set TIDEPOOL_POD_USER or TIDEPOOL_POD_UID to another user")
    image = spec.image or config.default_image
    if not image:
        raise OSError("the job names no image and this node has no default (TIDEPOOL_POD_IMAGE; bin/build-pod-image)")
    memory = memory_limit_bytes(spec, config)
    name = container_name(spec)
    args = [*config.podman_command(), "run", "--detach", "--name", name, "--hostname", name]
    args += ["--pull", config.pull, "--init", "--pid", "private", "--ipc", "private", "--cgroupns", "private"]
    args += ["--user", f"{user.uid}:{user.gid}", "--security-opt", "no-new-privileges", "--cap-drop", "all"]
    args += ["--memory", f"{memory}b", "--memory-swap", f"{memory}b", "--pids-limit", str(config.pids_limit)]
    if spec.cpu > 0:
        args += ["--cpus", f"{spec.cpu:g}"]
    if spec.shared_memory_gib > 0:
        args += ["--shm-size", f"{int(spec.shared_memory_gib * _GIB)}b"]
    args += ["--ulimit", f"nofile={config.nofile}:{config.nofile}", "--ulimit", f"nproc={config.nproc}:{config.nproc}"]
    if config.read_only:
        args += ["--read-only"]
    args += ["--tmpfs", f"/tmp:rw,nosuid,nodev,mode=1777,size={memory}"]
    for path in _bind_paths(spec):
        args += ["--mount", f"type=bind,source={path},destination={path}"]
    if spec.workdir:
        args += ["--workdir", spec.workdir]
    args += ["--network", network]
    if address:  # the routed network: the address the console chose for this pod
        args += ["--ip", address]
    if cgroup_parent:
        args += ["--cgroup-parent", cgroup_parent]
    args += gpu_device_args(spec.gpu_indices, config.dev_root, cdi)
    for key, value in (("job-uid", spec.job_uid), ("pod-id", spec.pod_id), ("attempt", spec.attempt)):
        args += ["--label", f"tidepool.{key}={value}"]
    for key, value in sorted(container_environment(spec, master_addr).items()):
        args += ["--env", f"{key}={value}"]
    args += [image, "/bin/sh", "-c", CONTAINER_WRAPPER, "tidepool-pod", SHELL_PREAMBLE + spec.command,
             spec.exit_path or "/dev/null", spec.log_path]
    return args


class ContainerSupervisor(PodSupervisor):
    """Runs a node's pods as Podman containers; same contract as PodSupervisor."""

    def __init__(self, config: ContainerConfig, on_exit=None) -> None:
        super().__init__(on_exit=on_exit)
        self.config = config
        self._networks = JobNetworks(config.podman_command(), config.network)
        self._routed = RoutedPods(config.podman_command(), config.network) if config.network.mode == "routed" else None
        self._cdi = cdi_gpu_spec_present(config.cdi_dirs)
        self._firewall_error: str | None = None
        if config.network.mode in ("job", "routed"):
            try:
                install_pod_firewall(config.network)
            except NetworkError as error:  # refuse pods rather than run them unfenced
                self._firewall_error = str(error)
                log.error("pod firewall not installed, pods will not start: %s", error)

    # -- podman ---------------------------------------------------------------------------

    def _podman(self, *args: str, timeout: float = _PODMAN_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.config.podman_command(), *args], capture_output=True, text=True,
                              timeout=timeout)

    def _memory_cgroup_v1(self) -> str | None:
        memory = os.path.join(self.config.cgroup_root, "memory")
        return memory if os.path.isfile(os.path.join(memory, "memory.limit_in_bytes")) else None

    # -- starting -------------------------------------------------------------------------

    def _pod_user(self, spec: PodSpec) -> PodUser:
        host_user = resolve_pod_user(spec.user)
        if host_user is not None:
            return PodUser(host_user.name, host_user.uid, host_user.gid, "/tmp")
        return PodUser(str(self.config.uid), self.config.uid, self.config.gid, "/tmp")

    def _launch(self, spec: PodSpec) -> PodProcess:
        if self._firewall_error is not None:
            raise OSError(f"this node's pod firewall is not in place: {self._firewall_error}")
        user = self._pod_user(spec)
        if user.uid == 0:
            raise OSError("pods never run as root in a container: set TIDEPOOL_POD_UID or TIDEPOOL_POD_USER")
        prepare_pod_dirs(spec, user)
        name = container_name(spec)
        if self.config.network.mode == "job":
            try:
                network = self._networks.ensure(spec.job_uid or f"job{spec.job_id}")
            except NetworkError as error:
                raise OSError(f"could not create the job's network: {error}") from None
            master = master_container_name(spec)
        elif self._routed is not None:
            if not spec.pod_address:
                raise OSError("this node runs a routed pod network but the console gave the pod no address: "
                              "register every node of the job with its own pod subnet (TIDEPOOL_POD_SUBNETS)")
            try:
                network = self._routed.ensure()
                self.connect_pod(spec)
            except NetworkError as error:
                raise OSError(f"could not connect the pod to the node's pod network: {error}") from None
            master = spec.master_addr
        else:
            network, master = "none", None
        cgroup_parent, cgroup_dir = None, None
        memory_root = self._memory_cgroup_v1()
        if memory_root is not None:
            cgroup_parent = f"/{self.config.cgroup_parent}/{name}"
            cgroup_dir = os.path.join(memory_root, self.config.cgroup_parent, name)
            os.makedirs(cgroup_dir, exist_ok=True)
        # A container of this name left by a crashed attempt of this worker would block the name.
        self._podman("rm", "--force", "--ignore", name)
        argv = podman_run_args(spec, self.config, user=user, network=network, cgroup_parent=cgroup_parent,
                               cdi=self._cdi, master_addr=master,
                               address=spec.pod_address if self._routed is not None else "")
        gpus = ",".join(str(i) for i in spec.gpu_indices) or "none"
        header = (
            f"=== tidepool: pod {spec.pod_id} (job {spec.job_id}) attempt {spec.attempt}, "
            f"rank {spec.rank}/{spec.world_size}, gpus {gpus}, container {name} "
            f"({spec.image or self.config.default_image}), started {now_iso()} ===\n"
        )
        with open(spec.log_path, "ab", buffering=0) as log_file:
            log_file.write(header.encode())
        own_file(spec.log_path, user)
        oom_kills = global_oom_kills()
        result = subprocess.run(argv, capture_output=True, text=True, timeout=_PODMAN_TIMEOUT_S)
        if result.returncode != 0:
            message = (result.stderr or result.stdout).strip().splitlines()
            reason = next((line for line in reversed(message) if line.startswith("Error")), message[-1] if message else "")
            with open(spec.log_path, "a", encoding="utf-8") as log_file:
                log_file.write("\n".join(message) + "\n")
            self._podman("rm", "--force", "--ignore", name)
            self._remove_cgroups(name)
            self._release_network(spec, network)
            raise OSError(f"podman run failed: {reason}")
        pid = self._container_pid(name)
        log.info("pod %s attempt %s started as container %s (pid %s)", spec.pod_id, spec.attempt, name, pid)
        return ContainerProcess(spec, name, pid, time.time(), network, cgroup_dir, memory_limit_bytes(spec, self.config),
                              oom_kills)

    _find = find_container  # a container left by the previous worker, by its labels (container_procs.py)

    def connect_pod(self, spec: PodSpec) -> None:
        """Routed network: the routes and firewall pairs `spec` gives now (start, adoption, every pass:
        an elastic job's peers change). Raises NetworkError. Nothing to do in the other modes."""
        if self._routed is not None and spec.pod_address:
            self._routed.connect((spec.pod_id, spec.attempt), spec.pod_address, spec.peer_addresses, spec.routes)

    def _release_network(self, spec: PodSpec, network: str) -> None:
        if self._routed is not None:
            self._routed.disconnect((spec.pod_id, spec.attempt))  # the node's network itself stays
        elif network not in ("none", ""):
            self._networks.release(network)

    def _container_pid(self, name: str) -> int:
        result = self._podman("inspect", "--format", "{{.State.Pid}}", name)
        try:
            return int(result.stdout.strip())
        except ValueError:
            return 0

    # -- terminating ----------------------------------------------------------------------

    def _request_termination(self, proc: PodProcess, grace_s: float, outcome: str) -> None:
        # Lock held: only bookkeeping here; Podman is driven from a thread.
        if proc.requested_outcome is not None or proc.leader_exited:
            return
        proc.requested_outcome = outcome
        assert isinstance(proc, ContainerProcess)
        seconds = max(0, math.ceil(grace_s))
        threading.Thread(target=self._stop_container, args=(proc, seconds), name=f"stop-{proc.name}",
                         daemon=True).start()

    def _stop_container(self, proc: ContainerProcess, seconds: int) -> None:
        # SIGTERM to the pod's init, SIGKILL of everything after `seconds`.
        result = self._podman("stop", "--time", str(seconds), proc.name, timeout=seconds + _PODMAN_TIMEOUT_S)
        if result.returncode != 0 and "no such container" not in result.stderr.lower():
            log.warning("podman stop %s: %s", proc.name, result.stderr.strip())

    def _kill(self, proc: PodProcess) -> None:
        assert isinstance(proc, ContainerProcess)
        proc.sigkill_sent = True
        threading.Thread(target=self._podman, args=("kill", "--signal", "KILL", proc.name), daemon=True).start()

    # -- watching -------------------------------------------------------------------------

    def _watch(self, proc: PodProcess) -> None:
        assert isinstance(proc, ContainerProcess)
        exit_code: int | None = None
        while exit_code is None:
            result = self._podman("wait", proc.name, timeout=None)  # type: ignore[arg-type]
            try:
                exit_code = int(result.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                if "no such container" in result.stderr.lower():
                    break
                log.warning("podman wait %s: %s; retrying", proc.name, result.stderr.strip())
                time.sleep(1.0)
        state = self._inspect_state(proc.name)
        with self._lock:
            proc.leader_exited = True
        if exit_code is None:
            exit_code = state.get("ExitCode", -1) if state else -1
        # The container and its processes are gone once rm returns: only then is the exit reported.
        removed = self._podman("rm", "--force", "--ignore", proc.name)
        if removed.returncode != 0:
            log.warning("podman rm %s: %s", proc.name, removed.stderr.strip())
        oom = bool(state.get("OOMKilled")) or self._hit_memory_limit(proc)
        self._remove_cgroups(proc.name)
        self._release_network(proc.spec, proc.network)
        written = read_exit_file(proc.spec.exit_path) if proc.spec.exit_path else None
        if written is None and exit_code == 137:
            exit_code = -9  # the pod's shell itself was SIGKILLed (end of the grace period): as on a host
            proc.killed = proc.requested_outcome is not None
        reason = ""
        if oom and (proc.requested_outcome is None) and exit_code != 0:
            reason = f"out of memory (limit {limit_text(proc.memory_bytes)} GiB)"
        with self._lock:
            proc.reaped = True
        self._report(proc, exit_code, reason)

    def _inspect_state(self, name: str) -> dict:
        result = self._podman("inspect", "--format", "json", name)
        try:
            return json.loads(result.stdout)[0].get("State", {})
        except (ValueError, IndexError, AttributeError):
            return {}

    def _hit_memory_limit(self, proc: ContainerProcess) -> bool:
        """Peak usage of the pod's own cgroup reached its limit and the kernel OOM-killed meanwhile."""
        if proc.cgroup_dir is None:
            return False
        try:
            peak = int(Path(proc.cgroup_dir, "memory.max_usage_in_bytes").read_text())
        except (OSError, ValueError):
            return False
        return peak >= proc.memory_bytes - 256 * 1024 and global_oom_kills() > proc.oom_kills_at_start

    def _remove_cgroups(self, name: str) -> None:
        """The pod's parent cgroups, in every v1 controller (Podman leaves them behind)."""
        root = self.config.cgroup_root
        try:
            controllers = os.listdir(root)
        except OSError:
            return
        for controller in controllers:
            parent = os.path.join(root, controller, self.config.cgroup_parent, name)
            if not os.path.isdir(parent):
                continue
            for dirpath, _dirs, _files in sorted(os.walk(parent), key=lambda entry: -len(entry[0])):
                try:
                    os.rmdir(dirpath)
                except OSError:
                    pass  # still in use (a conmon exiting): left for the next cleanup

