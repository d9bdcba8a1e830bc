"""`tidepool` commands: login, submit, jobs, get, logs, stop, restart, quotas, nodes (docs/cli.md)."""

from __future__ import annotations

import argparse
import getpass
import json
import sys
import uuid
from pathlib import Path
from typing import Any

import yaml

from tidepool_cli.client import OK, USAGE, Api, CliError, Config, load_config, save_config

JOB_COLUMNS = ("id", "name", "status", "quota", "gpus", "in_quota", "nodes", "queue_position")


def emit(args: argparse.Namespace, data: Any, columns: tuple[str, ...] | None = None) -> None:
    """Print `data` as JSON, YAML, or a table of `columns` (the default)."""
    if args.output == "json":
        print(json.dumps(data, indent=2))
    elif args.output == "yaml":
        print(yaml.safe_dump(data, sort_keys=False), end="")
    elif columns is None:
        print(yaml.safe_dump(data, sort_keys=False), end="")
    else:
        rows = data if isinstance(data, list) else [data]
        print_table(rows, columns)


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ",".join(str(v) for v in value) or "-"
    return str(value)


def print_table(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> None:
    table = [[c.upper().replace("_", "-") for c in columns]] + [[cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(columns))]
    for line in table:
        print("  ".join(text.ljust(width) for text, width in zip(line, widths, strict=True)).rstrip())


def cmd_login(args: argparse.Namespace) -> int:
    server = (args.server or input("Tidepool server (e.g. https://tidepool.example.com): ")).strip().rstrip("/")
    token = args.token or (getpass.getpass("API token (console: API tokens): ") if sys.stdin.isatty()
                           else sys.stdin.readline())
    config = Config(server=server, token=token.strip())
    me = Api(config).get("me/")
    path = save_config(config)
    print(f"Logged in to {server} as {me['username']} (workspaces: {', '.join(me['workspaces']) or 'none'}); "
          f"saved to {path}")
    return OK


def submission(args: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if args.file:
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text()
        body = yaml.safe_load(text) or {}
        if not isinstance(body, dict):
            raise CliError(f"{args.file}: a job file is a mapping of fields (name, workspace, quota, …)", USAGE)
    for field in ("name", "workspace", "quota", "priority", "idle_mode", "image", "max_restarts"):
        if getattr(args, field) is not None:
            body[field] = getattr(args, field)
    if args.command:
        body["command"] = " ".join(args.command)
    if args.fault_tolerance:
        body["fault_tolerance"] = True
    if args.env:
        env = dict(body.get("environment") or {})
        for item in args.env:
            key, sep, value = item.partition("=")
            if not sep:
                raise CliError(f"environment: {item!r} is not NAME=value", USAGE)
            env[key] = value
        body["environment"] = env
    role_flags = {"name": args.role, "pod_count": args.pods, "gpus": args.gpus, "gpu_type": args.gpu_type,
                  "cpu": args.cpu, "memory_gib": args.memory_gib}
    if any(v is not None for v in role_flags.values()):
        roles = body.get("roles") or [{}]
        if len(roles) != 1:
            raise CliError("roles: role flags apply to one-role jobs; edit the file for several roles", USAGE)
        roles[0].update({k: v for k, v in role_flags.items() if v is not None})
        body["roles"] = roles
    return body


def cmd_submit(args: argparse.Namespace) -> int:
    api = Api(load_config())
    key = args.idempotency_key or str(uuid.uuid4())  # a retry of this command with the same key is safe
    job = api.call("POST", "jobs/", submission(args), headers={"Idempotency-Key": key})
    emit(args, job, JOB_COLUMNS)
    return OK


def cmd_jobs(args: argparse.Namespace) -> int:
    api = Api(load_config())
    params = {"status": args.status, "quota": args.quota, "workspace": args.workspace,
              "mine": "1" if args.mine else None, "q": args.name}
    if not args.watch:
        emit(args, api.get("jobs/", **params)["results"], JOB_COLUMNS)
        return OK
    me = api.get("me/")["username"] if args.mine else None

    def wanted(job: dict[str, Any]) -> bool:  # the stream filters by status only: the rest here
        return ((not args.quota or args.quota == job["quota"])
                and (not args.workspace or args.workspace == job["workspace"])
                and (not args.name or args.name in job["name"]) and (me is None or job["owner"] == me))

    snapshot: list[dict[str, Any]] | None = []
    for event, job in api.events("jobs/watch/", status=args.status or "active"):  # a snapshot, then changes
        if event == "job" and not wanted(job):
            continue
        if args.output != "table":
            if event == "job":
                print(json.dumps(job), flush=True)  # one JSON document per line
        elif event == "synced" and snapshot is not None:
            print_table(snapshot, JOB_COLUMNS)
            snapshot = None
        elif event == "job" and snapshot is not None:
            snapshot.append(job)
        elif event == "job":
            print("  ".join(f"{c}={cell(job.get(c))}" for c in ("id", "name", "status", "nodes")), flush=True)
    return OK


def cmd_get(args: argparse.Namespace) -> int:
    api = Api(load_config())
    job = api.get(f"jobs/{api.job_id(args.job)}/")
    if args.output != "table":
        emit(args, job)
        return OK
    for key in ("id", "name", "status", "workspace", "quota", "owner", "priority", "idle_mode", "in_quota", "gpus",
                "gpu_type", "nodes", "restart_count", "queue_position", "waiting_reason", "command"):
        print(f"{key + ':':17}{cell(job.get(key))}")
    print()
    print_table(job["pods"], ("id", "role", "index", "attempt", "node", "gpu_indices", "status", "exit_code"))
    return OK


def cmd_logs(args: argparse.Namespace) -> int:
    api = Api(load_config())
    job_id = api.job_id(args.job)
    if args.follow:
        for text in api.stream_text(f"jobs/{job_id}/logs/", follow="1", pod=args.pod, lines=args.lines):
            sys.stdout.write(text)
            sys.stdout.flush()
        return OK
    window = api.get(f"jobs/{job_id}/logs/", pod=args.pod, lines=args.lines)
    if args.output != "table":
        emit(args, window)
    else:
        sys.stdout.write(window["text"])
    return OK


def cmd_action(args: argparse.Namespace) -> int:
    api = Api(load_config())
    job = api.call("POST", f"jobs/{api.job_id(args.job)}/{args.command_name}/")
    emit(args, job, JOB_COLUMNS)
    return OK


def cmd_quotas(args: argparse.Namespace) -> int:
    quotas = Api(load_config()).get("quotas/")
    if args.output != "table":
        emit(args, quotas)
        return OK
    rows = [{"name": "  " * q["depth"] + q["name"], "pool": q["resource_type"], **q["usage"]} for q in quotas]
    print_table(rows, ("name", "pool", "min_gpus", "in_quota_gpus", "borrowed_gpus", "lent_gpus", "running_jobs",
                       "pending_jobs"))
    return OK


def cmd_nodes(args: argparse.Namespace) -> int:
    nodes = Api(load_config()).get("nodes/")
    if args.output != "table":
        emit(args, nodes)
        return OK
    for node in nodes:
        node["state"] = "lost" if node["lost"] else "draining" if node["draining"] else (
            "ready" if node["schedulable"] else "cordoned")
    print_table(nodes, ("name", "resource_type", "gpu_type", "gpu_count", "gpus_used", "state"))
    return OK
