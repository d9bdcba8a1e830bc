"""The `tidepool` argument parser and entry point."""

from __future__ import annotations

import argparse
import re
import sys

from tidepool_cli import main as m
from tidepool_cli.client import USAGE, CliError

EPILOG = "exit codes: 0 ok, 1 refused (the message names the field), 2 usage, 3 not logged in or token " \
         "refused, 4 not found, 5 server unreachable or failing, 6 conflict (Idempotency-Key reused)"


def whole_number(text: str) -> int:
    """A count or id in ASCII digits: argparse's int() would read "١" and "１" as 1 and "1_0" as 10."""
    if not re.fullmatch(r"\+?[0-9]{1,18}", text.strip()):
        raise argparse.ArgumentTypeError(f"a whole number in ASCII digits (e.g. 4), got {text!r}")
    return int(text)


def number(text: str) -> float:
    """An amount in ASCII digits, as the API reads one (float() would take "١", "1_0", "nan")."""
    if not re.fullmatch(r"\+?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", text.strip()):
        raise argparse.ArgumentTypeError(f"a number in ASCII digits (e.g. 8 or 1.5), got {text!r}")
    return float(text)


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table",
                        help="output format (default: table)")
    common.add_argument("--json", dest="output", action="store_const", const="json", help="same as -o json")
    parser = argparse.ArgumentParser(prog="tidepool", description="Tidepool's command line.", epilog=EPILOG)
    sub = parser.add_subparsers(dest="command_name", required=True)

    login = sub.add_parser("login", parents=[common], help="save the server and an API token")
    login.add_argument("--server", help="the console's URL (default: TIDEPOOL_SERVER, else http://127.0.0.1:8000, "
                       "the console bin/start serves)")
    login.add_argument("--token", help="default: asked for (or read from stdin)")
    login.set_defaults(run=m.cmd_login)

    submit = sub.add_parser("submit", parents=[common], help="submit a job from a file and/or flags")
    submit.add_argument("-f", "--file", help="a YAML or JSON job file (keys of POST /api/v1/jobs/; - for stdin)")
    submit.add_argument("--name")
    submit.add_argument("--workspace")
    submit.add_argument("--quota")
    submit.add_argument("--role", help="role name (default worker)")
    submit.add_argument("--pods", type=whole_number, help="pods of the role (an elastic role's maximum)")
    submit.add_argument("--min-pods", type=whole_number,
                        help="elastic role (DESIGN §2c): its minimum pods; needs --idle-mode acceptable or only")
    submit.add_argument("--gpus", type=whole_number, help="GPUs per pod")
    submit.add_argument("--gpu-type")
    submit.add_argument("--cpu", type=number, help="CPU cores per pod")
    submit.add_argument("--memory-gib", type=number, help="memory per pod, GiB")
    submit.add_argument("--priority", type=whole_number)
    submit.add_argument("--idle-mode", choices=("off", "acceptable", "only"))
    submit.add_argument("--image")
    submit.add_argument("--fault-tolerance", action="store_true")
    submit.add_argument("--max-restarts", type=whole_number)
    submit.add_argument("--env", action="append", metavar="NAME=VALUE")
    submit.add_argument("--idempotency-key", help="default: a new random key per invocation")
    submit.add_argument("command", nargs="*", help="the command (after --)")
    submit.set_defaults(run=m.cmd_submit)

    jobs = sub.add_parser("jobs", parents=[common], help="list jobs; --watch follows changes")
    jobs.add_argument("--status", help="a status or active, pending, finished")
    jobs.add_argument("--quota")
    jobs.add_argument("--workspace")
    jobs.add_argument("--name", help="part of the name")
    jobs.add_argument("--mine", action="store_true")
    jobs.add_argument("-w", "--watch", action="store_true", help="then print a line each time a job's "
                      "status, standing, nodes or queue place changes (Ctrl-C to stop)")
    jobs.set_defaults(run=m.cmd_jobs)

    for name, run, text in (("get", m.cmd_get, "a job's detail"), ("stop", m.cmd_action, "stop a job"),
                            ("restart", m.cmd_action, "restart a finished job")):
        command = sub.add_parser(name, parents=[common], help=text)
        command.add_argument("job", help="job id or name")
        command.set_defaults(run=run)

    logs = sub.add_parser("logs", parents=[common], help="a pod's log")
    logs.add_argument("job", help="job id or name")
    logs.add_argument("-f", "--follow", action="store_true", help="stream until the pod exits")
    logs.add_argument("--pod", type=whole_number, help="pod id (default: rank 0 of the newest attempt)")
    logs.add_argument("--lines", type=whole_number, default=200)
    logs.set_defaults(run=m.cmd_logs)

    sub.add_parser("quotas", parents=[common], help="the quota tree with use").set_defaults(run=m.cmd_quotas)
    sub.add_parser("nodes", parents=[common], help="nodes and their GPUs").set_defaults(run=m.cmd_nodes)
    drain = sub.add_parser("drain", parents=[common], help="drain a node (staff): cordon it, its jobs are preempted "
                           "with their grace period and restart elsewhere")
    drain.add_argument("node", help="the node's name")
    drain.set_defaults(run=m.cmd_drain)
    sub.add_parser("node-keys", parents=[common], help="node keys (staff): prefix, state; never the key") \
        .set_defaults(run=m.cmd_node_keys)
    node_key = sub.add_parser("node-key", parents=[common], help="add a node (its key, shown once), rotate or "
                              "revoke its key (staff)")
    node_key.add_argument("action", choices=("add", "rotate", "revoke"))
    node_key.add_argument("node", help="the node's name")
    node_key.set_defaults(run=m.cmd_node_key)
    return parser


def run(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except CliError as error:
        print(f"error: {error}".replace("\n", "\nerror: "), file=sys.stderr)
        return error.code
    except OSError as error:  # a job file that cannot be read, …
        print(f"error: {error}", file=sys.stderr)
        return USAGE
    except KeyboardInterrupt:
        return 130


def cli() -> None:
    sys.exit(run())
