"""`tidepool` commands: login, submit, jobs, get, logs, stop, restart, quotas, nodes, drain, node keys (docs/cli.md)."""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
import urllib.parse
import uuid
from pathlib import Path
from typing import Any

import yaml

from tidepool_cli.client import (
    DEFAULT_SERVER,
    OK,
    USAGE,
    Api,
    CliError,
    Config,
    load_config,
    save_config,
    server_url,
)

# start_estimate: §2d, "starts in about 2 h 10 min" while queued (the API's text)
JOB_COLUMNS = ("id", "name", "status", "quota", "gpus", "in_quota", "nodes", "queue_position", "start_estimate")


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
    """--server, else TIDEPOOL_SERVER, else the embedded default's console (bin/start)."""
    if args.server is not None:
        server = server_url(args.server, "--server")
    elif os.environ.get("TIDEPOOL_SERVER"):
        server = server_url(os.environ["TIDEPOOL_SERVER"], "TIDEPOOL_SERVER")
    else:
        server = DEFAULT_SERVER
    token = args.token or (getpass.getpass(f"API token for {server} (console: API tokens): ") if sys.stdin.isatty()
                           else sys.stdin.readline())
    if not token.strip():
        raise CliError("no API token given: create one on the console's API tokens page, then "
                       "`echo \"$TOKEN\" | tidepool login` or `tidepool login --token TOKEN`", USAGE)
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
    if isinstance(body.get("environment"), dict):  # YAML reads PORT: 8080 as a number; the API takes text
        body["environment"] = {key: str(value) if isinstance(value, int | float) and not isinstance(value, bool)
                               else value for key, value in body["environment"].items()}
    if args.env:
        env = dict(body.get("environment") or {})
        for item in args.env:
            key, sep, value = item.partition("=")
            if not sep:
                raise CliError(f"environment: {item!r} is not NAME=value", USAGE)
            env[key] = value
        body["environment"] = env
    role_flags = {"name": args.role, "pod_count": args.pods, "min_pod_count": args.min_pods, "gpus": args.gpus,
                  "gpu_type": args.gpu_type, "cpu": args.cpu, "memory_gib": args.memory_gib}
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

    # The stream sends a job again whenever its row changes (each progress report, every few seconds
    # while it runs); a line is printed only when what it shows differs from that job's last line.
    snapshot: dict[Any, dict[str, Any]] | None = {}  # the table printed once the snapshot is complete
    shown: dict[Any, str] = {}
    for event, job in api.events("jobs/watch/", status=args.status or "active"):  # a snapshot, then changes
        if event == "synced" and snapshot is not None:
            if args.output == "table":
                print_table(list(snapshot.values()), JOB_COLUMNS)
            snapshot = None
        if event != "job" or not wanted(job):
            continue
        line = json.dumps(job) if args.output != "table" else watch_line(job)  # JSON: one document per line
        if shown.get(job["id"]) == line:
            continue
        shown[job["id"]] = line
        if args.output == "table" and snapshot is not None:
            snapshot[job["id"]] = job
        else:
            print(line, flush=True)
    return OK


WATCH_FIELDS = ("id", "name", "status", "in_quota", "nodes", "queue_position")


def watch_line(job: dict[str, Any]) -> str:
    """One change of `jobs --watch`: the fields of the list a user follows (queue place only while queued)."""
    return "  ".join(f"{c}={cell(job.get(c))}" for c in WATCH_FIELDS if c != "queue_position" or
                     job.get(c) is not None)


def cmd_get(args: argparse.Namespace) -> int:
    api = Api(load_config())
    job = api.get(f"jobs/{api.job_id(args.job)}/")
    if args.output != "table":
        emit(args, job)
        return OK
    for key in ("id", "name", "status", "workspace", "quota", "owner", "priority", "idle_mode", "in_quota", "gpus",
                "gpu_type", "nodes", "restart_count", "queue_position", "start_estimate", "time_limit_note",
                "waiting_reason", "command"):
        if key in ("start_estimate", "time_limit_note") and not job.get(key):
            continue  # only while queued / near the limit
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


NODE_COLUMNS = ("name", "resource_type", "gpu_type", "gpu_count", "gpus_used", "state")


def _node_state(node: dict[str, Any]) -> dict[str, Any]:
    node["state"] = "lost" if node["lost"] else "draining" if node["draining"] else (
        "ready" if node["schedulable"] else "cordoned")
    return node


def cmd_nodes(args: argparse.Namespace) -> int:
    nodes = Api(load_config()).get("nodes/")
    if args.output != "table":
        emit(args, nodes)
        return OK
    print_table([_node_state(node) for node in nodes], NODE_COLUMNS)
    return OK


def cmd_drain(args: argparse.Namespace) -> int:
    node = Api(load_config()).call("POST", f"nodes/{urllib.parse.quote(args.node, safe='')}/drain/")
    if args.output != "table":
        emit(args, node)
        return OK
    print_table([_node_state(node)], NODE_COLUMNS)
    return OK


NODE_KEY_COLUMNS = ("node", "prefix", "created_at", "last_used_at", "state")


def _key_state(key: dict[str, Any]) -> dict[str, Any]:
    key["state"] = "live" if key["live"] else "revoked"
    return key


def cmd_node_keys(args: argparse.Namespace) -> int:
    keys = Api(load_config()).get("node-keys/")
    if args.output != "table":
        emit(args, keys)
        return OK
    print_table([_key_state(key) for key in keys], NODE_KEY_COLUMNS)
    return OK


def cmd_node_key(args: argparse.Namespace) -> int:
    """add / rotate: the key alone on stdout (it is shown this once: `KEY=$(tidepool node-key add gpu-03)`),
    what to do with it on stderr; revoke: the key's row."""
    api = Api(load_config())
    node = urllib.parse.quote(args.node, safe="")
    if args.action == "add":
        key = api.call("POST", "node-keys/", {"node": args.node})
    else:
        key = api.call("POST", f"node-keys/{node}/{args.action}/")
    if args.output != "table":
        emit(args, key)
    elif args.action == "revoke":
        print_table([_key_state(key)], NODE_KEY_COLUMNS)
    else:
        verb = "added" if args.action == "add" else "has a new key (the old one is refused from now on)"
        print(f"node {key['node']} {verb}; its key, shown this once, goes in TIDEPOOL_NODE_KEY on the node:",
              file=sys.stderr)
        print(key["key"])
    return OK
