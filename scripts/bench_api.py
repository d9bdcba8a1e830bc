#!/usr/bin/env python3
"""API submissions under concurrent clients, against a running console (e.g. `bin/cluster start --seed`).

    .venv/bin/python scripts/bench_api.py --url http://127.0.0.1:8000 --clients 50 --submissions 1500

Each client is a thread with its own keep-alive connection, submitting jobs through POST /api/v1/jobs/
with a personal API token (--token, default $TIDEPOOL_TOKEN; console: API tokens). The jobs go to team-vision (one node's GPUs guaranteed) with idle
mode `off`: a few run (`echo bench`), the rest queue with a reason, so this measures the console
rather than the nodes while the scheduler keeps cycling over a growing queue. (A job that could never
run in its quota with idle `off` is refused at submission, issue 11, so the quota must guarantee some.) Bounded: stops after --submissions
requests or --max-seconds, whichever comes first. Prints figures, then one JSON line.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import threading
import time
import urllib.parse


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--token", default=os.environ.get("TIDEPOOL_TOKEN", ""),
                        help="a personal API token of a member of --workspace (default: $TIDEPOOL_TOKEN)")
    parser.add_argument("--workspace", default="vision")
    parser.add_argument("--quota", default="team-vision")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--submissions", type=int, default=1500)
    parser.add_argument("--max-seconds", type=float, default=120)
    parser.add_argument("--command", default="sleep 3600",
                        help="each job's command (default: long, so the quota's GPUs stay busy and the rest queue)")
    parser.add_argument("--warmup", type=int, default=20, help="requests before timing (fills auth caches)")
    parser.add_argument("--new-connections", action="store_true",
                        help="a new connection per request (default: one keep-alive connection per client; "
                        "a worker process keeps the connections it accepted, so their load is uneven)")
    args = parser.parse_args()
    if not args.token:
        parser.error("--token (or $TIDEPOOL_TOKEN) is required: create a personal API token on the console's "
                     "API tokens page (/tokens/)")
    return args


class Run:
    """--warmup untimed requests, then --submissions timed ones, shared by --clients threads."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.target = urllib.parse.urlsplit(args.url)
        self.headers = {"Authorization": f"Bearer {args.token}", "Content-Type": "application/json",
                        "Connection": "close" if args.new_connections else "keep-alive"}
        self.counter = iter(range(10**9))
        self.lock = threading.Lock()
        self.latencies: list[float] = []
        self.statuses: dict[int, int] = {}
        self.errors: list[str] = []
        self.left = args.warmup + args.submissions
        self.timing = threading.Event()
        self.deadline = time.monotonic() + args.max_seconds + 60

    def body(self) -> bytes:
        n = next(self.counter)
        return json.dumps({
            "name": f"bench-{int(time.time())}-{n}", "workspace": self.args.workspace, "quota": self.args.quota,
            "command": self.args.command, "idle_mode": "off", "priority": 1 + n % 9,
            "roles": [{"name": "worker", "pod_count": 1, "gpus": 1, "cpu": 1, "memory_gib": 1}],
        }).encode()

    def connection(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self.target.hostname, self.target.port or 80, timeout=60)

    def client(self) -> None:
        connection = self.connection()
        while time.monotonic() < self.deadline:
            with self.lock:
                if self.left <= 0:
                    break
                self.left -= 1
                timed = self.left < self.args.submissions
            started = time.monotonic()
            try:
                connection.request("POST", "/api/v1/jobs/", body=self.body(), headers=self.headers)
                response = connection.getresponse()
                response.read()
                status = response.status
                if self.args.new_connections:
                    connection.close()
            except Exception as error:  # count it, reconnect, go on
                status = 0
                with self.lock:
                    self.errors.append(repr(error))
                connection.close()
                connection = self.connection()
            if timed:
                self.timing.set()
                with self.lock:
                    self.latencies.append(time.monotonic() - started)
                    self.statuses[status] = self.statuses.get(status, 0) + 1
        connection.close()

    def go(self) -> float:
        threads = [threading.Thread(target=self.client, daemon=True) for _ in range(self.args.clients)]
        for thread in threads:
            thread.start()
        self.timing.wait(self.args.max_seconds)
        started = time.monotonic()
        self.deadline = started + self.args.max_seconds
        for thread in threads:
            thread.join(self.args.max_seconds + 70)
        return time.monotonic() - started


def main() -> int:
    args = parse_args()
    run = Run(args)
    seconds = run.go()
    latencies, statuses = run.latencies, run.statuses
    created = statuses.get(201, 0)
    result = {
        "clients": args.clients,
        "connections": "new per request" if args.new_connections else "keep-alive",
        "requests": len(latencies),
        "created": created,
        "statuses": statuses,
        "seconds": round(seconds, 2),
        "submissions_per_s": round(created / seconds, 1) if seconds else 0,
        "p50_s": round(statistics.median(latencies), 3) if latencies else None,
        "p95_s": round(percentile(latencies, 95), 3),
        "p99_s": round(percentile(latencies, 99), 3),
        "max_s": round(max(latencies), 3) if latencies else None,
        "errors": run.errors[:5],
    }
    print(f"{created} submissions in {seconds:.1f} s from {args.clients} clients: "
          f"{result['submissions_per_s']}/s; latency p50 {result['p50_s']} s, p95 {result['p95_s']} s, "
          f"p99 {result['p99_s']} s, max {result['max_s']} s; statuses {statuses}")
    print(json.dumps(result))
    return 0 if created == len(latencies) and not run.errors else 1


if __name__ == "__main__":
    raise SystemExit(main())
