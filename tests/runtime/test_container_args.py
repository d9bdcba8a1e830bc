"""What the container runtime asks Podman for (no Podman needed): the GPU devices, the limits and
the walls of DESIGN §6 as `podman run` arguments. tests/runtime/test_container_walls.py runs them."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.node.runtime.container import (
    ContainerConfig,
    container_environment,
    gpu_device_args,
    podman_run_args,
)
from scheduler.node.runtime.network import NetworkConfig, firewall_rules
from scheduler.node.runtime.process import PodSpec
from scheduler.node.runtime.sandbox import PodUser

NOBODY = PodUser("nobody", 65534, 65534, "/tmp")


def spec(tmp_path: Path, **overrides) -> PodSpec:
    values = dict(
        pod_id=7, job_id=3, attempt=2, command="python3 train.py", env={}, gpu_indices=(), rank=0, world_size=1,
        master_addr="127.0.0.1", master_port=29500, checkpoint_dir=str(tmp_path / "ckpt"), restart_count=0,
        workdir=str(tmp_path / "work"), log_path=str(tmp_path / "a2" / "main-0.log"),
        progress_path=str(tmp_path / "a2" / "progress-0.json"), job_uid="0b7e", exit_path=str(tmp_path / "a2" / "x"),
    )
    values.update(overrides)
    return PodSpec(**values)


def devices(args: list[str]) -> list[str]:
    return [args[i + 1] for i, arg in enumerate(args) if arg == "--device"]


def option(args: list[str], name: str) -> list[str]:
    return [args[i + 1] for i, arg in enumerate(args) if arg == name]


@pytest.fixture
def dev_root(tmp_path: Path) -> Path:
    """A /dev of an 8-GPU node: nvidia0..7 and the driver's control nodes."""
    root = tmp_path / "dev"
    root.mkdir()
    for name in [f"nvidia{i}" for i in range(8)] + ["nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"]:
        (root / name).touch()
    return root


def test_a_pod_gets_the_device_nodes_of_its_gpus_and_no_others(tmp_path, dev_root):
    config = ContainerConfig(default_image="img", dev_root=str(dev_root))
    pod = spec(tmp_path, gpu_indices=(2, 5), env={"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"})
    args = podman_run_args(pod, config, user=NOBODY, network="none")
    assert devices(args) == [f"{dev_root}/nvidia2", f"{dev_root}/nvidia5", f"{dev_root}/nvidiactl",
                             f"{dev_root}/nvidia-uvm", f"{dev_root}/nvidia-uvm-tools"]
    env = dict(item.split("=", 1) for item in option(args, "--env"))
    # Inside, the two devices are the container's GPUs 0 and 1, whatever the job asked for.
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert env["TIDEPOOL_GPU_INDICES"] == "2,5"
    assert "--privileged" not in args and not any(a.startswith("--device-cgroup-rule") for a in args)


def test_declared_gpus_without_device_nodes_give_no_device(tmp_path):
    """A node whose GPUs are declared (no /dev/nvidia<i>) runs its pods with no GPU device at all, not
    the driver's control nodes alone and never another GPU."""
    dev_root = tmp_path / "dev"
    dev_root.mkdir()
    (dev_root / "nvidiactl").touch()
    args = podman_run_args(spec(tmp_path, gpu_indices=(0, 1)), ContainerConfig(default_image="img", dev_root=str(dev_root)),
                           user=NOBODY, network="none")
    assert devices(args) == []
    assert dict(item.split("=", 1) for item in option(args, "--env"))["TIDEPOOL_GPU_INDICES"] == "0,1"


def test_cdi_names_the_gpus_by_index_and_a_cpu_pod_gets_no_device(tmp_path, dev_root):
    assert gpu_device_args((1, 3), str(dev_root), cdi=True) == ["--device", "nvidia.com/gpu=1",
                                                               "--device", "nvidia.com/gpu=3"]
    args = podman_run_args(spec(tmp_path), ContainerConfig(default_image="img", dev_root=str(dev_root)),
                           user=NOBODY, network="none")
    assert devices(args) == []
    assert dict(item.split("=", 1) for item in option(args, "--env"))["CUDA_VISIBLE_DEVICES"] == ""


def test_limits_come_from_the_pods_request(tmp_path):
    config = ContainerConfig(default_image="img", pids_limit=512, nofile=4096, nproc=8192)
    pod = spec(tmp_path, cpu=2.5, memory_gib=3, shared_memory_gib=1)
    args = podman_run_args(pod, config, user=NOBODY, network="none")
    gib = 1024**3
    assert option(args, "--memory") == [f"{3 * gib}b"] and option(args, "--memory-swap") == [f"{3 * gib}b"]
    assert option(args, "--cpus") == ["2.5"]
    assert option(args, "--pids-limit") == ["512"]
    assert option(args, "--shm-size") == [f"{gib}b"]
    assert option(args, "--ulimit") == ["nofile=4096:4096", "nproc=8192:8192"]
    assert option(args, "--tmpfs") == [f"/tmp:rw,nosuid,nodev,mode=1777,size={3 * gib}"]
    # A role that asks no memory still gets a limit: the node's default.
    unbounded = podman_run_args(spec(tmp_path), ContainerConfig(default_image="img", default_memory_gib=2),
                                user=NOBODY, network="none")
    assert option(unbounded, "--memory") == [f"{2 * gib}b"] and option(unbounded, "--cpus") == []


def test_the_walls_are_asked_for(tmp_path):
    pod = spec(tmp_path, mounts=(str(tmp_path / "ws" / "data"),))
    args = podman_run_args(pod, ContainerConfig(default_image="img"), user=NOBODY, network="tidepool-job-0b7e")
    assert option(args, "--user") == ["65534:65534"]
    assert option(args, "--security-opt") == ["no-new-privileges"]
    assert option(args, "--cap-drop") == ["all"] and "--cap-add" not in args
    assert option(args, "--pid") == ["private"] and option(args, "--ipc") == ["private"]
    assert "--read-only" in args and "--init" in args
    assert option(args, "--network") == ["tidepool-job-0b7e"]
    binds = sorted(option(args, "--mount"))
    assert binds == sorted(f"type=bind,source={p},destination={p}" for p in (
        tmp_path / "a2", tmp_path / "work", tmp_path / "ckpt", tmp_path / "ws" / "data"))
    assert args[args.index("img") + 1:args.index("img") + 3] == ["/bin/sh", "-c"]


def test_root_is_refused_and_a_path_podman_cannot_bind_too(tmp_path):
    with pytest.raises(OSError, match="never run as root"):
        podman_run_args(spec(tmp_path), ContainerConfig(default_image="img"), user=PodUser("root", 0, 0, "/"),
                        network="none")
    with pytest.raises(OSError, match="with ',' or ':'"):
        podman_run_args(spec(tmp_path, mounts=("/data/a,b",)), ContainerConfig(default_image="img"), user=NOBODY,
                        network="none")
    with pytest.raises(OSError, match="no default"):
        podman_run_args(spec(tmp_path), ContainerConfig(), user=NOBODY, network="none")


def test_the_workers_environment_stays_out(tmp_path, monkeypatch):
    for key, value in {"SECRET_KEY": "s3cret", "DATABASE_URL": "postgres://x", "REDIS_URL": "redis://y",
                       "PATH": "/home/worker/.venv/bin:/usr/bin", "NCCL_DEBUG": "INFO", "LANG": "C.UTF-8"}.items():
        monkeypatch.setenv(key, value)
    env = container_environment(spec(tmp_path, env={"MY_FLAG": "1"}, env_allow=("PATH", "LANG", "NCCL_*")))
    assert not {"SECRET_KEY", "DATABASE_URL", "REDIS_URL"} & env.keys()
    assert "PATH" not in env  # the image's PATH stands, not the worker's virtualenv
    assert env["NCCL_DEBUG"] == "INFO" and env["LANG"] == "C.UTF-8" and env["MY_FLAG"] == "1"
    assert env["HOME"] == "/tmp"


def test_the_firewall_drops_the_pod_pool_before_the_host():
    rules = firewall_rules(NetworkConfig(subnet_pool="10.213.0.0/16", blocked_networks=("192.0.2.10",)))
    assert "type filter hook input priority -10" in rules
    assert "ip saddr 10.213.0.0/16 counter drop" in rules
    assert "ip saddr 10.213.0.0/16 ip daddr { 192.0.2.10/32 } counter drop" in rules
    with pytest.raises(ValueError, match="'job', 'routed' or 'none'"):
        NetworkConfig(mode="host")


def test_an_elastic_pods_rendezvous_is_rank_0s_container_on_the_jobs_network(tmp_path):
    """DESIGN §2c: every pod of an elastic job meets at a base pod's store; in containers that is rank
    0's container name (the job's MASTER_ADDR there), not the host address the control plane gave."""
    pod = spec(tmp_path, rank=1, world_size=3, master_addr="10.0.0.5", master_port=29612,
               env={"TIDEPOOL_MIN_PODS": "1", "TIDEPOOL_MAX_PODS": "4"})
    env = container_environment(pod, master_addr="tp-0b7e-a2-r0", base={})
    assert env["MASTER_ADDR"] == env["PET_MASTER_ADDR"] == "tp-0b7e-a2-r0"
    assert env["PET_RDZV_ENDPOINT"] == "tp-0b7e-a2-r0:29612" and env["PET_NNODES"] == "1:4"
    fixed = container_environment(spec(tmp_path, rank=1, world_size=2), master_addr="tp-0b7e-a2-r0", base={})
    assert "PET_RDZV_ENDPOINT" not in fixed
