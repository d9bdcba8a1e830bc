"""Drive the several-host test bed (bin/testbed, docs/operations.md) from tests: started and taken down exactly
as the docs say, the console's API as users, and each host's processes read from its network namespace."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]


def bed_unavailable() -> str | None:
    """Why the bed cannot run here, or None."""
    if os.geteuid() != 0:
        return "the several-host bed makes network namespaces, veth pairs and a bridge: it needs root"
    if shutil.which("ip") is None:
        return "iproute2's ip is not installed"
    probe = subprocess.run(["ip", "netns", "add", "tp-probe"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"ip netns is not available here: {probe.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", "tp-probe"], capture_output=True)
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        # The bed's control plane always runs on PostgreSQL (a database of its own); CI runs the suite on
        # PostgreSQL and again on SQLite, and the bed is run once, with the first.
        return "the bed runs with the PostgreSQL suite (DATABASE_URL=postgres://…), once"
    if shutil.which("cc") is None:
        return "the bed's host with a clock 5 minutes off needs a C compiler (apt-get install -y gcc)"
    return None


def bed_environment(base: Path, database: str, node_timeout_s: int) -> dict[str, str]:
    """bin/testbed's environment for a test: its own directory and database, failures timed in seconds."""
    return {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root"), "TIDEPOOL_TESTBED_DIR": str(base),
            "TIDEPOOL_TESTBED_DB": database, "TIDEPOOL_NODE_TIMEOUT": str(node_timeout_s),
            "TIDEPOOL_HEARTBEAT_SECONDS": "1", "TIDEPOOL_LEASE_SECONDS": "3", "TIDEPOOL_SCHEDULER_INTERVAL": "0.5",
            "TIDEPOOL_RECONCILE_SECONDS": "0.5", "TIDEPOOL_GRACE_SECONDS": "3", "TIDEPOOL_RESTART_BACKOFF_BASE": "1"}


def started_bed(base: Path, env: dict[str, str], hosts: int, *up_args: str) -> Bed:
    """`bin/testbed up` with `hosts` hosts, once every agent has registered its node."""
    made = Bed(base, env)
    made.testbed("up", "--hosts", str(hosts), *up_args, timeout=400)
    wait_for(lambda: len(made.nodes()) == hosts, 90, "every host's agent to register its node", step=0.5)
    return made


class Bed:
    def __init__(self, base: Path, env: dict[str, str]) -> None:
        self.base, self.env = base, env
        self.url = f"http://{env.get('TIDEPOOL_TESTBED_NET', '10.231.0')}.1:{env.get('TIDEPOOL_TESTBED_PORT', '8900')}"
        self._tokens: dict[str, str] = {}

    def testbed(self, *args: str, timeout: float = 300) -> str:
        done = subprocess.run([str(ROOT / "bin" / "testbed"), *args], cwd=ROOT, env=self.env, capture_output=True,
                              text=True, timeout=timeout)
        assert done.returncode == 0, f"bin/testbed {' '.join(args)}: {done.stdout}\n{done.stderr}"
        return done.stdout

    def shell(self, code: str) -> str:
        return self.testbed("manage", "shell", "-c", code).strip().splitlines()[-1]

    def token(self, username: str) -> str:
        if username not in self._tokens:
            self._tokens[username] = self.shell(
                "from django.contrib.auth.models import User; from scheduler.services.tokens import token_create;"
                f"print(token_create(user=User.objects.get(username='{username}'), name='bed').secret)")
        return self._tokens[username]

    def api(self, user: str, method: str, path: str, body: Any = None) -> Any:
        request = urllib.request.Request(f"{self.url}/api/v1/{path}", method=method,
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers={"Authorization": f"Bearer {self.token(user)}",
                                                  "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=20) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError as error:
            raise AssertionError(f"{method} {path}: {error.code} {error.read()[:1000]!r}") from None

    def job(self, job_id: int) -> dict[str, Any]:
        return self.api("admin", "GET", f"jobs/{job_id}/")

    def nodes(self) -> dict[str, dict[str, Any]]:
        return {node["name"]: node for node in self.api("admin", "GET", "nodes/")}

    def addresses(self) -> dict[str, str]:
        """Each node's address as its agent registered it (staff see it on the Nodes page; the API leaves it out)."""
        return json.loads(self.shell("import json; from scheduler.models import Node;"
                                     "print(json.dumps(dict(Node.objects.values_list('name', 'address'))))"))

    def hosts(self) -> list[str]:
        return (self.base / "hosts").read_text().split()

    def agent_pid(self, host: str) -> int:
        return int((self.base / "pids" / f"agent-{host}.pid").read_text())

    def agent_log(self, host: str) -> str:
        return (self.base / "logs" / f"agent-{host}.log").read_text(errors="replace")


def running_pods(bed: Bed, job_id: int) -> list[dict[str, Any]]:
    """The pods of the job's current attempt by rank, once the job and every one of them run; else []."""
    job = bed.job(job_id)
    pods = [pod for pod in job["pods"] if pod["attempt"] == job["attempt"]]
    if job["status"] == "Running" and pods and all(pod["status"] == "Running" for pod in pods):
        return sorted(pods, key=lambda pod: pod["rank"])
    return []


def host_pids(host: str) -> list[int]:
    """Every process in the host's network namespace (its agent, its pods)."""
    done = subprocess.run(["ip", "netns", "pids", f"tp-{host}"], capture_output=True, text=True)
    return [int(pid) for pid in done.stdout.split()]


def environ(pid: int) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
        with open(f"/proc/{pid}/stat", "rb") as f:
            if f.read().rsplit(b")", 1)[-1].split()[0] == b"Z":
                return {}
    except OSError:
        return {}
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {key.decode(errors="replace"): value.decode(errors="replace") for key, value in pairs}


def pod_processes(host: str) -> dict[tuple[int, int], list[int]]:
    """(job id, attempt) -> pids of that attempt's pod processes running in the host's namespace."""
    found: dict[tuple[int, int], list[int]] = {}
    for pid in host_pids(host):
        env = environ(pid)
        if "TIDEPOOL_JOB_ID" in env and "TIDEPOOL_ATTEMPT" in env:
            found.setdefault((int(env["TIDEPOOL_JOB_ID"]), int(env["TIDEPOOL_ATTEMPT"])), []).append(pid)
    return found
