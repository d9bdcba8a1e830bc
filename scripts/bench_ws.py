#!/usr/bin/env python3
"""Websocket fan-out against a running console (e.g. `bin/cluster start --seed`).

    .venv/bin/python scripts/bench_ws.py --url http://127.0.0.1:8000 --clients 200 --updates 20 --idle 300

N browsers' job lists (/ws/jobs/, one logged-in session) are connected through the console's server
and the Redis channel layer. The script starts a blocker job holding the quota's guarantee
(--blocker-gpus, 4 = team-vision's in `bin/cluster --seed`), queues --updates jobs behind it
(idle resources off), then stops them one by one through
/api/v1/ with the logged-in session (as the console's pages call it), and times, for every socket, the moment the re-rendered row showing the job Stopped arrives:
from the stop request's send (end to end, the request included) and from its answer (the commit and
the broadcast happen before the answer: what the fan-out adds). Then all sockets stay idle for --idle seconds, and one more
update must reach every one of them. Bounded by its arguments; prints figures, then one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import http.cookiejar
import json
import statistics
import time
import urllib.error
import urllib.parse
import urllib.request

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


class Api:
    """/api/v1/ through the logged-in browser session (cookie and CSRF token), as the console's pages."""

    def __init__(self, url: str, cookie: str) -> None:
        self.url = url
        csrf = next(part.split("=", 1)[1] for part in cookie.split("; ") if part.startswith("csrftoken="))
        self.headers = {"Cookie": cookie, "X-CSRFToken": csrf, "Referer": url + "/"}

    def call(self, method: str, path: str, body: object = None) -> tuple[int, object]:
        request = urllib.request.Request(self.url + path, method=method,
                                         data=json.dumps(body).encode() if body is not None else None,
                                         headers={**self.headers, "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, error.read()[:300]


def login(url: str, user: str, password: str) -> str:
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    opener.open(url + "/accounts/login/", timeout=60).read()
    csrf = next(c.value for c in jar if c.name == "csrftoken")
    form = urllib.parse.urlencode({"username": user, "password": password, "csrfmiddlewaretoken": csrf}).encode()
    opener.open(urllib.request.Request(url + "/accounts/login/", data=form), timeout=60).read()
    cookies = {c.name: c.value for c in jar}
    if "sessionid" not in cookies:
        raise SystemExit("login failed")
    return "; ".join(f"{k}={v}" for k, v in cookies.items())


API_SECONDS: list[float] = []  # how long each stop request took to answer (part of every latency)
FROM_ANSWER: list[float] = []  # receipt − the stop request's answer


class Client:
    def __init__(self, index: int) -> None:
        self.index = index
        self.seen: dict[int, float] = {}  # job id -> when its Stopped row arrived
        self.closed: str | None = None
        self.messages = 0

    async def run(self, url: str, cookie: str, origin: str, ready: asyncio.Event, connected: list) -> None:
        try:
            async with connect(url, additional_headers={"Cookie": cookie, "Origin": origin}, open_timeout=60,
                               ping_interval=None, max_size=2**24) as socket:
                connected.append(self)
                if len(connected) == ready.target:  # type: ignore[attr-defined]
                    ready.set()
                async for raw in socket:
                    now = time.monotonic()
                    self.messages += 1
                    message = json.loads(raw)
                    rows = message.get("rows")
                    if isinstance(rows, list):
                        for row in rows:
                            if 'data-status="Stopped"' in row.get("html", ""):
                                self.seen.setdefault(row["id"], now)
        except ConnectionClosed as error:
            self.closed = f"closed: {error}"
        except Exception as error:  # noqa: BLE001 - reported
            self.closed = repr(error)
        else:
            self.closed = "closed by the server"


async def update_round(api: Api, clients: list[Client], job_ids: list[int], interval: float,
                       wait: float) -> tuple[list[float], int, int]:
    loop = asyncio.get_running_loop()
    sent: dict[int, float] = {}
    answered: dict[int, float] = {}
    for job_id in job_ids:
        sent[job_id] = time.monotonic()
        status, body = await loop.run_in_executor(None, api.call, "POST", f"/api/v1/jobs/{job_id}/stop/")
        answered[job_id] = time.monotonic()
        API_SECONDS.append(answered[job_id] - sent[job_id])
        if status != 200:
            raise SystemExit(f"stop of job {job_id} answered {status}: {body}")
        await asyncio.sleep(interval)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if all(job_id in c.seen for c in clients for job_id in job_ids):
            break
        await asyncio.sleep(0.1)
    latencies = [c.seen[j] - sent[j] for c in clients for j in job_ids if j in c.seen]
    # The same, counted from the stop request's answer (its commit and broadcast happen before it):
    # what the fan-out adds to the request itself.
    FROM_ANSWER.extend(max(0.0, c.seen[j] - answered[j]) for c in clients for j in job_ids if j in c.seen)
    return latencies, len(latencies), len(clients) * len(job_ids)


def summary(latencies: list[float]) -> dict[str, float | None]:
    if not latencies:
        return {"p50_ms": None, "p95_ms": None, "max_ms": None}
    return {"p50_ms": round(statistics.median(latencies) * 1000, 1),
            "p95_ms": round(percentile(latencies, 95) * 1000, 1),
            "max_ms": round(max(latencies) * 1000, 1)}


async def submit(api: Api, args: argparse.Namespace, suffix: str, gpus: int) -> int:
    status, body = await asyncio.get_running_loop().run_in_executor(None, api.call, "POST", "/api/v1/jobs/", {
        "name": f"ws-bench-{int(time.time())}-{suffix}", "workspace": args.workspace, "quota": args.quota,
        "command": "sleep 3600", "idle_mode": "off",
        "roles": [{"name": "worker", "pod_count": 1, "gpus": gpus, "cpu": 1, "memory_gib": 1}]})
    if status != 201:
        raise SystemExit(f"could not queue a job: {status} {body}")
    return body["id"]  # type: ignore[index]


async def main_async(args: argparse.Namespace) -> int:
    loop = asyncio.get_running_loop()
    cookie = await loop.run_in_executor(None, login, args.url, args.user, args.password)
    api = Api(args.url, cookie)
    job_ids = []
    # A blocker takes the quota's whole guarantee, so the measured jobs stay queued: stopping one is a
    # commit and a broadcast, with no pod to wait for (the fan-out is measured, not the nodes).
    blocker = [await submit(api, args, "blocker", args.blocker_gpus)]
    for n in range(args.updates + 1):  # the last one is for after the idle spell
        job_ids.append(await submit(api, args, str(n), 1))
    ws_url = args.url.replace("http", "ws", 1) + "/ws/jobs/"
    clients = [Client(i) for i in range(args.clients)]
    ready = asyncio.Event()
    ready.target = args.clients  # type: ignore[attr-defined]
    connected: list[Client] = []
    started = time.monotonic()
    tasks = [asyncio.create_task(c.run(ws_url, cookie, args.url, ready, connected)) for c in clients]
    try:
        await asyncio.wait_for(ready.wait(), args.connect_timeout)
    except TimeoutError:
        raise SystemExit(f"only {len(connected)} of {args.clients} sockets connected") from None
    connect_s = time.monotonic() - started
    await asyncio.sleep(2)  # let the snapshots arrive

    latencies, got, expected = await update_round(api, clients, job_ids[:-1], args.interval, args.wait)
    live = summary(latencies)
    await asyncio.sleep(args.idle)
    dropped = [c.closed for c in clients if c.closed]
    idle_latencies, idle_got, idle_expected = await update_round(api, clients, job_ids[-1:], 0, args.wait)
    for task in tasks:
        task.cancel()
    await loop.run_in_executor(None, api.call, "POST", f"/api/v1/jobs/{blocker[0]}/stop/", None)
    result = {
        "clients": args.clients, "updates": args.updates, "connect_s": round(connect_s, 2),
        "delivered": got, "expected": expected, "delivered_pct": round(100 * got / expected, 2) if expected else 0,
        **live,
        "idle_s": args.idle, "dropped_during_idle": len(dropped),
        "after_idle_delivered_pct": round(100 * idle_got / idle_expected, 2) if idle_expected else 0,
        "after_idle": summary(idle_latencies),
        "drops": dropped[:3],
        "stop_request": summary(API_SECONDS),
        "from_answer": summary(FROM_ANSWER),
    }
    print(f"{args.clients} sockets (connected in {connect_s:.1f} s), {args.updates} updates: "
          f"{result['delivered_pct']} % delivered, p50 {live['p50_ms']} ms, p95 {live['p95_ms']} ms, "
          f"max {live['max_ms']} ms; after {args.idle:.0f} s idle: {len(dropped)} dropped, "
          f"{result['after_idle_delivered_pct']} % delivered (p95 {result['after_idle']['p95_ms']} ms); "
          f"the stop requests themselves: p50 {result['stop_request']['p50_ms']} ms, p95 "
          f"{result['stop_request']['p95_ms']} ms; receipt after the answer: p50 {result['from_answer']['p50_ms']} ms, "
          f"p95 {result['from_answer']['p95_ms']} ms")
    print(json.dumps(result))
    ok = got == expected and idle_got == idle_expected and not dropped
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--user", default="alice")
    parser.add_argument("--password", default="tidepool-alice")
    parser.add_argument("--workspace", default="vision")
    parser.add_argument("--quota", default="team-vision")
    parser.add_argument("--blocker-gpus", type=int, default=4,
                        help="GPUs of the first job, which runs and keeps the others queued: the quota's guarantee")
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--updates", type=int, default=20)
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between updates")
    parser.add_argument("--wait", type=float, default=15, help="seconds to wait for stragglers after a round")
    parser.add_argument("--idle", type=float, default=300, help="seconds of silence before the last update")
    parser.add_argument("--connect-timeout", type=float, default=120)
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
