"""Bounded chaos on the production stack, loopback only; stops by itself and cleans up.

    nice -n 5 .venv/bin/python scripts/chaos.py [--jobs 2000 --clients 50 --scheduler-kills 20 --redis-down 60]

Starts its own redis-server (port 6390, never the shared one), a fresh PostgreSQL database
(`tidepool_chaos` on 127.0.0.1:5432), the console (gunicorn + uvicorn workers, config/serving.py), two `run_scheduler` (leader + standby)
and two Celery node workers (8 declared GPUs each). Then, while 50 clients submit 2,000 jobs
through the REST API: the scheduler leader is SIGKILLed 20 times at random moments (and restarted),
one worker is SIGKILLed and restarted 20 s later, and Redis is stopped for 60 s. 60 s after the
last fault it checks: no job lost or duplicated, no pod Pending or Running without a live process
for over 30 s, no job Failed that never ran or whose pod exited 0; and, sampled every second
throughout, no GPU held twice (in the database, or by two live processes). It then waits (bounded)
for every job to finish and prints the figures as JSON (last line).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

REDIS_PORT = 6390
DB_NAME = "tidepool_chaos"
TEAMS = ("t1", "t2", "t3", "t4", "t5")


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--scheduler-kills", type=int, default=20)
    parser.add_argument("--redis-down", type=float, default=60.0)
    parser.add_argument("--worker-down", type=float, default=20.0)
    parser.add_argument("--submit-seconds", type=float, default=150.0, help="spread the submissions over this")
    parser.add_argument("--finish-timeout", type=float, default=900.0)
    parser.add_argument("--port", type=int, default=8790)
    return parser.parse_args()


class Stack:
    """The processes of the run, each in its own session, with its log under `dir/logs`."""

    def __init__(self, dir: Path, env: dict[str, str], port: int) -> None:
        self.dir, self.env, self.port = dir, env, port
        (dir / "logs").mkdir(parents=True, exist_ok=True)
        self.procs: dict[str, subprocess.Popen] = {}
        self.generation: dict[str, int] = {}

    def start(self, name: str, argv: list[str], **env: str) -> subprocess.Popen:
        self.generation[name] = self.generation.get(name, 0) + 1
        log = open(self.dir / "logs" / f"{name}-{self.generation[name]}.log", "wb")
        self.procs[name] = subprocess.Popen(argv, cwd=ROOT, env={**self.env, **env}, stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        return self.procs[name]

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        process = self.procs.get(name)
        if process is not None and process.poll() is None:
            os.killpg(process.pid, sig) if sig == signal.SIGKILL else process.send_signal(sig)
            process.wait(30)

    def redis(self) -> None:
        self.start("redis", ["redis-server", "--port", str(REDIS_PORT), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(self.dir)])

    def scheduler(self, index: int) -> None:
        self.start(f"scheduler-{index}", [sys.executable, "manage.py", "run_scheduler"],
                   PGAPPNAME=f"chaos-scheduler-{index}")

    def worker(self, node: str) -> None:
        self.start(f"worker-{node}", [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", f"node.{node}",
                                      "-n", f"{node}@%h", "--without-gossip", "--without-mingle", "-l", "info"],
                   TIDEPOOL_NODE_NAME=node)

    def console(self) -> None:
        """As docs/operations.md serves it: gunicorn with uvicorn workers (config/serving.py)."""
        self.start("console", [sys.executable, "-m", "gunicorn", "-c", "python:config.serving"],
                   TIDEPOOL_BIND=f"127.0.0.1:{self.port}", TIDEPOOL_DB_POOL="1")

    def stop_all(self) -> None:
        for name in list(self.procs):
            try:
                self.kill(name)
            except Exception:
                pass


def environment(dir: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("TIDEPOOL_", "DATABASE_URL", "REDIS_URL"))}
    env.update(
        DEBUG="0", SECRET_KEY="chaos-" + os.urandom(24).hex(), ALLOWED_HOSTS="127.0.0.1", TIDEPOOL_HTTPS="0",
        DATABASE_URL=f"postgres://postgres@127.0.0.1:5432/{DB_NAME}", REDIS_URL=f"redis://127.0.0.1:{REDIS_PORT}/0",
        TIDEPOOL_EXECUTOR="celery", TIDEPOOL_EMBEDDED_SCHEDULER="0", TIDEPOOL_DATA_DIR=str(dir / "data"),
        TIDEPOOL_SCHEDULER_INTERVAL="1", TIDEPOOL_RECONCILE_SECONDS="3", TIDEPOOL_HEARTBEAT_SECONDS="3",
        TIDEPOOL_NODE_TIMEOUT="60", TIDEPOOL_LEASE_SECONDS="15", TIDEPOOL_GRACE_SECONDS="5",
        TIDEPOOL_RESTART_BACKOFF_BASE="1", TIDEPOOL_RESTART_BACKOFF_CAP="10", TIDEPOOL_POD_USER="nobody",
        TIDEPOOL_NODE_GPU_TYPE="A100", TIDEPOOL_NODE_GPUS="8", TIDEPOOL_NODE_CPU="16", TIDEPOOL_NODE_MEMORY_GIB="64",
        TIDEPOOL_WORKER_CONCURRENCY="4", PYTHONUNBUFFERED="1", TIDEPOOL_LOG_LEVEL="WARNING",
        DJANGO_SETTINGS_MODULE="config.settings",
    )
    return env


def fresh_database() -> None:
    import psycopg

    with psycopg.connect("host=127.0.0.1 user=postgres dbname=postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB_NAME}")


def seed() -> dict[str, str]:
    """Five teams (3 GPUs guaranteed each of the 16) with two users each; returns user → password."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from scheduler.models import Workspace
    from scheduler.services.nodes import node_register
    from scheduler.services.quotas import quota_create

    call_command("migrate", verbosity=0)
    for node in ("node-1", "node-2"):  # the workers re-register them with the same inventory
        node_register(name=node, gpu_type="A100", gpu_count=8, cpu=16, memory_gib=64)
    root = quota_create(name="root", min_gpus={"A100": 16}, min_cpu=32, min_memory_gib=128)
    users = {}
    for team in TEAMS:
        space = Workspace.objects.create(name=team)
        quota_create(name=f"q-{team}", parent=root, min_gpus={"A100": 3}, min_cpu=6, min_memory_gib=24,
                     workspaces=[space])
        for i in (1, 2):
            name, password = f"{team}-user{i}", f"pw-{team}-{i}-chaos"
            get_user_model().objects.create_user(name, password=password)
            space.members.add(get_user_model().objects.get(username=name))
            users[name] = password
    return users


def leader_scheduler() -> str | None:
    """The run_scheduler holding the leader lock (its PGAPPNAME), from pg_locks."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                       "WHERE l.locktype = 'advisory' AND l.objid = 727001 AND l.granted")
        row = cursor.fetchone()
    return row[0].removeprefix("chaos-") if row and row[0].startswith("chaos-") else None


def faults(stack: Stack, args, log: list[str], done: threading.Event) -> float:
    """The fault schedule; returns the time of the last fault (end of the last outage).

    Long because it is the timeline, one step after the other, easier to check in one place.
    """
    t0 = time.monotonic()
    rng = random.Random(7)
    kill_times = sorted(rng.uniform(5, args.submit_seconds) for _ in range(args.scheduler_kills))
    events = [(t, "scheduler") for t in kill_times]
    worker_at, redis_at = 0.2 * args.submit_seconds, 0.4 * args.submit_seconds
    events += [(worker_at, "worker-kill"), (worker_at + args.worker_down, "worker-start")]
    events += [(redis_at, "redis-stop"), (redis_at + args.redis_down, "redis-start")]
    last = time.monotonic()
    for at, what in sorted(events):
        time.sleep(max(0.0, t0 + at - time.monotonic()))
        now = round(time.monotonic() - t0, 1)
        if what == "scheduler":
            try:
                victim = leader_scheduler() or rng.choice(["scheduler-0", "scheduler-1"])
            except Exception:  # the database is fine; Django's connection may be closed: pick at random
                victim = rng.choice(["scheduler-0", "scheduler-1"])
            stack.kill(victim)
            time.sleep(rng.uniform(0.2, 1.5))
            stack.scheduler(int(victim[-1]))
            log.append(f"{now}s SIGKILL {victim} (restarted)")
        elif what == "worker-kill":
            stack.kill("worker-node-2")
            log.append(f"{now}s SIGKILL worker-node-2")
        elif what == "worker-start":
            stack.worker("node-2")
            log.append(f"{now}s worker-node-2 started again")
        elif what == "redis-stop":
            stack.kill("redis")
            log.append(f"{now}s redis stopped")
        elif what == "redis-start":
            stack.redis()
            log.append(f"{now}s redis started again")
        last = time.monotonic()
    done.set()
    return last


class Client:
    """One API client: a session (logged in once: HTTP Basic would hash the password per request)."""

    def __init__(self, base: str, username: str, password: str) -> None:
        import http.cookiejar
        import urllib.request

        self.base, self.username, self.password = base, username, password
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def _cookie(self, name: str) -> str:
        return next((c.value for c in self.jar if c.name == name), "")

    def login(self) -> None:
        import re
        import urllib.parse

        with self.opener.open(self.base + "/accounts/login/", timeout=60) as response:
            token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', response.read().decode()).group(1)
        data = urllib.parse.urlencode({"username": self.username, "password": self.password,
                                       "csrfmiddlewaretoken": token}).encode()
        with self.opener.open(self.base + "/accounts/login/", data=data, timeout=60) as response:
            assert "/accounts/login/" not in response.geturl(), f"login as {self.username} failed"

    def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        import urllib.error
        import urllib.request

        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method, headers={
            "Content-Type": "application/json", "X-CSRFToken": self._cookie("csrftoken"),
            "Referer": self.base + "/"})
        try:
            with self.opener.open(req, timeout=60) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            return error.code, {"error": error.read()[:500].decode(errors="replace")}

    def find(self, name: str) -> int | None:
        status, body = self.request("GET", f"/api/v1/jobs/?q={name}")
        if status != 200:
            raise RuntimeError(f"list answered {status}")
        return next((row["id"] for row in body.get("results", []) if row["name"] == name), None)


def submit_all(client: Client, jobs: list[dict], spread_s: float, results: dict, latencies: list,
               errors: list) -> None:
    """Submit `jobs` one by one over `spread_s`; a failed request is retried only once the API
    says the job does not exist (so a retry never duplicates a job that was in fact created)."""
    rng = random.Random(jobs[0]["name"] if jobs else client.username)
    gap = spread_s / max(1, len(jobs))
    for body in jobs:
        time.sleep(rng.uniform(0, 2 * gap))
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            started = time.monotonic()
            try:
                status, answer = client.request("POST", "/api/v1/jobs/", body)
            except Exception as error:  # connection refused/reset, timeout: maybe created, maybe not
                status, answer = None, {"error": repr(error)}
            latencies.append(time.monotonic() - started)
            if status == 201:
                results[body["name"]] = answer["id"]
                break
            errors.append(f"{body['name']}: {status} {str(answer)[:200]}")
            if status is not None and 400 <= status < 500:
                break  # refused: never accepted
            time.sleep(1)
            try:
                found = client.find(body["name"])
            except Exception:
                continue
            if found is not None:
                results[body["name"]] = found
                break


def plan_jobs(total: int, clients: list[Client]) -> tuple[list[list[dict]], set[str]]:
    """1-GPU jobs: 95 % sleep 1-3 s and exit 0 (fault tolerance on), 5 % exit 3 (no fault tolerance);
    every fifth borrows idle capacity only (idle mode `only`), so owners reclaim it.
    Job i goes to client i mod the number of clients (several clients share a user)."""
    rng = random.Random(42)
    per_client: list[list[dict]] = [[] for _ in clients]
    ok: set[str] = set()
    for i in range(total):
        client = clients[i % len(clients)]
        team = client.username.split("-")[0]
        bad = rng.random() < 0.05
        name = f"chaos-{'bad' if bad else 'ok'}-{i:05d}"
        if not bad:
            ok.add(name)
        per_client[i % len(clients)].append({
            "name": name, "workspace": team, "quota": f"q-{team}",
            "command": f"sleep {rng.choice([1, 1, 2, 3])}" + ("; exit 3" if bad else "; exit 0"),
            "roles": [{"name": "worker", "pod_count": 1, "gpus": 1, "cpu": 1, "memory_gib": 2}],
            # A fifth only borrow idle capacity: the owners' jobs reclaim it (preemptions under chaos).
            "idle_mode": "only" if i % 5 == 0 else "acceptable", "fault_tolerance": not bad, "max_restarts": 20,
        })
    return per_client, ok


def wait_until(predicate, timeout: float, step: float = 0.5) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return True
        except Exception:
            pass
        time.sleep(step)
    return False


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3) if ordered else 0.0


def run(args, dir: Path) -> dict:
    """Long because it is the run from start to end: stack up, load + faults, checks, figures."""
    env = environment(dir)
    (dir / "data").mkdir(parents=True)
    os.chmod(dir, 0o755)
    os.chmod(dir / "data", 0o755)  # pods run as nobody: they must reach their own directories
    os.environ.update(env)
    fresh_database()
    import django

    django.setup()
    from chaos_checks import Sampler, all_final, check_invariants, restart_figures, status_counts

    from scheduler.models import Job

    stack = Stack(dir, env, args.port)
    stack.redis()
    time.sleep(1)
    users = seed()
    stack.console()
    for index in (0, 1):
        stack.scheduler(index)
    for node in ("node-1", "node-2"):
        stack.worker(node)
    base = f"http://127.0.0.1:{args.port}"
    figures: dict = {"command": " ".join(sys.argv), "dir": str(dir)}
    try:
        assert wait_until(lambda: Client(base, "t1-user1", users["t1-user1"]).login() is None, 120), "no console"
        from scheduler.models import Node
        assert wait_until(lambda: Node.objects.filter(last_heartbeat__isnull=False).count() == 2, 120), "no workers"
        names = sorted(users)
        clients = [Client(base, names[i % len(names)], users[names[i % len(names)]]) for i in range(args.clients)]
        for client in clients:
            client.login()
        per_client, intended_ok = plan_jobs(args.jobs, clients)
        uids: set[str] = set()

        def our_uids() -> set[str]:
            if len(uids) < len(accepted):
                uids.update(str(u) for u in Job.objects.filter(name__startswith="chaos-").values_list("uid", flat=True))
            return uids

        accepted: dict[str, int] = {}
        latencies: list[float] = []
        errors: list[str] = []
        sampler = Sampler(our_uids)
        sampler.start()
        started = time.monotonic()
        threads = [threading.Thread(target=submit_all, args=(c, jobs, args.submit_seconds, accepted, latencies, errors),
                                    daemon=True) for c, jobs in zip(clients, per_client, strict=True)]
        for thread in threads:
            thread.start()
        fault_log: list[str] = []
        faults_done = threading.Event()
        last_fault = faults(stack, args, fault_log, faults_done)
        for thread in threads:
            thread.join(600)
        time.sleep(max(0.0, last_fault + 60 - time.monotonic()))
        figures["at_last_fault_plus_60s"] = check_invariants(accepted, intended_ok)
        figures["status_at_last_fault_plus_60s"] = status_counts()
        finished = wait_until(all_final, args.finish_timeout, step=2)
        sampler.stop.set()
        figures.update({
            "all_final": finished, "seconds_to_all_final": round(time.monotonic() - started, 1),
            "seconds_after_last_fault": round(time.monotonic() - last_fault, 1),
            "final": check_invariants(accepted, intended_ok), "final_status": status_counts(),
            "faults": fault_log, "submit_errors": len(errors), "submit_error_examples": errors[:5],
            "submit_latency_p50_s": percentile(latencies, 0.5), "submit_latency_p95_s": percentile(latencies, 0.95),
            "samples": sampler.samples.taken, "sample_errors": sampler.errors,
            "gpu_double_booked_db": sampler.samples.db_double_booked[:10],
            "gpu_double_booked_processes": sampler.samples.process_double_booked[:10],
            "max_live_pods": sampler.samples.max_live_pods, "max_pod_processes": sampler.samples.max_pod_processes,
            **restart_figures(),
        })
        return figures
    finally:
        figures["processes_alive_at_end"] = {name: p.poll() is None for name, p in stack.procs.items()}
        stack.stop_all()
        leftovers = kill_leftover_pods(dir)
        figures["pod_processes_killed_at_cleanup"] = leftovers


def kill_leftover_pods(dir: Path) -> int:
    """Pods of this run still alive at the end (their data dir names them): SIGKILL their groups."""
    from chaos_checks import pod_processes

    try:
        from scheduler.models import Job
        ours = {str(u) for u in Job.objects.values_list("uid", flat=True)}
    except Exception:
        return -1
    killed = 0
    for pid, (uid, _pod) in pod_processes().items():
        if uid in ours:
            try:
                os.killpg(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
    return killed


def port_in_use(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def main() -> int:
    args = parse()
    if not shutil.which("redis-server"):
        print("needs redis-server", file=sys.stderr)
        return 2
    busy = [port for port in (REDIS_PORT, args.port) if port_in_use(port)]
    if busy:  # a leftover of an earlier run would silently serve this one
        print(f"port(s) {busy} already in use on 127.0.0.1: stop what listens there first", file=sys.stderr)
        return 2
    # SIGTERM/SIGINT end the run through its cleanup (processes, pods) like any other exit.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: sys.exit(3))
    dir = Path(tempfile.mkdtemp(prefix="tidepool-chaos-", dir="/tmp"))
    figures = run(args, dir)
    checks = figures["at_last_fault_plus_60s"]
    ok = not (checks["lost"] or checks["duplicated"] or checks["pods_pending_without_process_over_30s"]
              or checks["failed_jobs_that_never_ran"] or checks["failed_jobs_with_a_pod_exited_0_recorded_failed"]
              or figures["gpu_double_booked_db"] or figures["gpu_double_booked_processes"])
    figures["passed"] = ok
    print(json.dumps(figures, indent=1, default=str))
    print(json.dumps({k: v for k, v in figures.items() if not isinstance(v, list | dict)}, default=str))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
