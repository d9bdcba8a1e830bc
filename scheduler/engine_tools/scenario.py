"""Scenario files (DESIGN §4): one scheduling cycle as YAML or JSON, run with its expectations.

`load(path)` turns a file into a `Scenario` (a Snapshot plus the optional `expect:` block), with
units converted (CPU cores -> millicores, memory GiB -> MiB) and defaults filled in: resource_type
`general` for nodes and roots (a child quota inherits its parent's, a job its quota's), the policy
block's §2b defaults (`now` required once min_runtime_s or starvation_s is above 0, or a job has a
time limit, §2d), priority 1, idle `off`, submitted_at = the job's position in the file, state `pending`,
pod role `worker` and count 1; a running or terminating job's `in_quota` defaults to true unless its
idle mode is `only`, its `started_at` to its `submitted_at`. A root quota without `min` is
guaranteed its pool's capacity.

A file that does not make sense raises `ScenarioError`, naming the file, the place inside it
(`jobs[2].idle`) and what is wrong, instead of running a cycle nobody meant.

`main(argv, stdout, stderr)` runs files and compares: exit 0 when all match (or have no
`expect:`), 1 when a decision differs (the diff is printed), 2 when a file is malformed.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import yaml

from scheduler.engine.cycle import run_cycle
from scheduler.engine.quota import tree_problems
from scheduler.engine.types import (
    CPU,
    DEFAULT_POOL,
    IDLE_MODES,
    IDLE_OFF,
    IDLE_ONLY,
    IDLE_SHARE_FIFO,
    IDLE_SHARES,
    MEMORY,
    NOMINATED,
    PENDING,
    PHASES,
    RUNNING,
    TERMINATING,
    Job,
    Node,
    Pod,
    Policy,
    Quota,
    Snapshot,
    gpu_key,
)

from .scenario_elastic import compare_resizes, elastic_pods, grown_and_shrunk
from .scenario_read import Reader, ScenarioError, kind

TOP_KEYS = ("now", "policy", "nodes", "quotas", "jobs", "expect")
POLICY_KEYS = ("idle_share", "min_runtime_s", "starvation_s", "starvation_hold", "starved_min_runtime_s",
               "default_time_limit_s", "grow_interval_s")
NODE_KEYS = ("name", "gpu_type", "gpus", "cpu", "memory_gib", "resource_type", "schedulable")
QUOTA_KEYS = ("name", "parent", "min", "max", "resource_type", "preempt_within")
RESOURCE_KEYS = ("gpus", "cpu", "memory_gib")
JOB_KEYS = (
    "name", "quota", "priority", "idle", "submitted_at", "pods", "state", "in_quota", "started_at", "nodes",
    "resource_type", "checkpointed_at", "demoted", "time_limit_s", "resized_at",
)
POD_KEYS = ("role", "count", "min_count", "gpus", "gpu_type", "cpu", "memory_gib")
EXPECT_KEYS = ("admitted", "preempted", "nominated", "promoted", "demoted", "pending", "reasons", "estimated_start",
               "grown", "shrunk")
EXPECT_LISTS = ("preempted", "nominated", "promoted", "demoted", "pending")


@dataclass(frozen=True)
class Scenario:
    source: str
    snapshot: Snapshot
    expect: dict[str, Any] | None


# --- the file ------------------------------------------------------------------------------------------


def load(path: str | Path) -> Scenario:
    """Read and check one scenario file (`.json` as JSON, anything else as YAML)."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(source, "", f"cannot read: {exc.strerror or exc}") from exc
    try:
        data = json.loads(text) if source.endswith(".json") else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise ScenarioError(source, "", f"not valid {'JSON' if source.endswith('.json') else 'YAML'}: {exc}") from exc
    return parse(data, source=source)


def parse(data: Any, *, source: str = "<scenario>") -> Scenario:
    """Check a parsed scenario mapping and build its Snapshot."""
    read = Reader(source)
    top = read.mapping(data if data is not None else {}, "", TOP_KEYS)
    now = read.number(top["now"], "now", low=None) if top.get("now") is not None else None
    policy = _policy(read, top.get("policy"), now)
    nodes = _nodes(read, read.items(top.get("nodes"), "nodes"))
    quotas = _quotas(read, read.items(top.get("quotas"), "quotas"), nodes)
    jobs = _jobs(read, read.items(top.get("jobs"), "jobs"), nodes, quotas)
    if now is None and (policy.default_time_limit_s > 0 or any(job.time_limit_s is not None for job in jobs)):
        raise read.fail("now", "the file has time limits (§2d): it needs `now`, the cycle's time")
    if now is None and any(job.elastic is not None for job in jobs):
        raise read.fail("now", "the file has elastic jobs (§2c): it needs `now`, the cycle's time")
    expect = _expect(read, top["expect"], {job.name for job in jobs}) if "expect" in top else None
    snapshot = Snapshot(nodes=tuple(nodes), quotas=tuple(quotas), jobs=tuple(jobs), now=now, policy=policy)
    return Scenario(source=source, snapshot=snapshot, expect=expect)


def _policy(read: Reader, value: Any, now: float | None) -> Policy:
    """The file's `policy:` block (DESIGN §2b); `now` is required once a policy reads the time."""
    raw = read.mapping(value if value is not None else {}, "policy", POLICY_KEYS)
    idle_share = raw.get("idle_share", IDLE_SHARE_FIFO)
    if idle_share not in IDLE_SHARES:
        raise read.fail("policy.idle_share", f"unknown idle share {kind(idle_share)} (use {' or '.join(IDLE_SHARES)})")
    min_runtime_s = read.number(raw.get("min_runtime_s", 0), "policy.min_runtime_s")
    starvation_s = read.number(raw.get("starvation_s", 0), "policy.starvation_s")
    for key, value in (("min_runtime_s", min_runtime_s), ("starvation_s", starvation_s)):
        if value > 0 and now is None:
            raise read.fail("now", f"{key} is above 0: the file needs `now`, the cycle's time")
    starvation_hold = raw.get("starvation_hold", False)
    if not isinstance(starvation_hold, bool):
        raise read.fail("policy.starvation_hold", f"expected true or false, got {kind(starvation_hold)}")
    if starvation_hold and starvation_s <= 0:
        raise read.fail("policy.starvation_hold", "starvation_hold needs starvation_s above 0 (it extends the guard)")
    starved = read.number(raw.get("starved_min_runtime_s", 0), "policy.starved_min_runtime_s")
    if starved > 0 and starvation_s <= 0:
        raise read.fail("policy.starved_min_runtime_s",
                        "starved_min_runtime_s needs starvation_s above 0 (it protects jobs the guard let start)")
    default_limit = read.number(raw.get("default_time_limit_s", 0), "policy.default_time_limit_s")
    return Policy(idle_share=idle_share, min_runtime_s=min_runtime_s, starvation_s=starvation_s,
                  starvation_hold=starvation_hold, starved_min_runtime_s=starved, default_time_limit_s=default_limit,
                  grow_interval_s=read.number(raw.get("grow_interval_s", 300), "policy.grow_interval_s"))


def _unique(read: Reader, names: list[str], path: str, what: str) -> None:
    seen: set[str] = set()
    for i, name in enumerate(names):
        if name in seen:
            raise read.fail(f"{path}[{i}].name", f"duplicate {what} name '{name}'")
        seen.add(name)


def _nodes(read: Reader, items: list[Any]) -> list[Node]:
    nodes = []
    for i, item in enumerate(items):
        path = f"nodes[{i}]"
        raw = read.mapping(item, path, NODE_KEYS)
        gpus = read.integer(raw.get("gpus", 0), f"{path}.gpus")
        gpu_type = raw.get("gpu_type")
        if gpu_type is None and gpus:
            raise read.fail(f"{path}.gpu_type", "a node with GPUs needs a gpu_type")
        nodes.append(
            Node(
                name=read.text(raw.get("name"), f"{path}.name"),
                gpu_type=read.text(gpu_type, f"{path}.gpu_type") if gpu_type is not None else "",
                gpus=gpus,
                cpu_m=read.millicores(raw.get("cpu", 0), f"{path}.cpu"),
                memory_mib=read.mib(raw.get("memory_gib", 0), f"{path}.memory_gib"),
                pool=read.text(raw.get("resource_type", DEFAULT_POOL), f"{path}.resource_type"),
                schedulable=read.flag(raw.get("schedulable", True), f"{path}.schedulable"),
            )
        )
    _unique(read, [n.name for n in nodes], "nodes", "node")
    return nodes


def _resources(read: Reader, value: Any, path: str) -> dict[str, int]:
    """{gpus: {A100: 16}, cpu: 192, memory_gib: 1536} as an engine vector."""
    raw = read.mapping(value, path, RESOURCE_KEYS)
    out: dict[str, int] = {}
    gpus = raw.get("gpus")
    if gpus is not None:
        if not isinstance(gpus, Mapping):
            raise read.fail(f"{path}.gpus", f"expected GPUs per model ({{A100: 8}}), got {kind(gpus)}")
        for model, count in gpus.items():
            out[gpu_key(read.text(model, f"{path}.gpus"))] = read.integer(count, f"{path}.gpus.{model}")
    if "cpu" in raw:
        out[CPU] = read.millicores(raw["cpu"], f"{path}.cpu")
    if "memory_gib" in raw:
        out[MEMORY] = read.mib(raw["memory_gib"], f"{path}.memory_gib")
    return out


def _quotas(read: Reader, items: list[Any], nodes: list[Node]) -> list[Quota]:
    quotas = []
    raws = [read.mapping(item, f"quotas[{i}]", QUOTA_KEYS) for i, item in enumerate(items)]
    stated = {raw.get("name"): raw.get("resource_type") for raw in raws}
    parent_of = {raw.get("name"): raw.get("parent") for raw in raws}

    def inherited(name: Any) -> Any:
        """A quota that states no pool is in its parent's (DESIGN §4); a root without one is `general`."""
        seen = set()
        while stated.get(name) is None and parent_of.get(name) in stated and name not in seen:
            seen.add(name)
            name = parent_of[name]
        return stated.get(name) or DEFAULT_POOL

    for i, raw in enumerate(raws):
        path = f"quotas[{i}]"
        parent = raw.get("parent")
        quotas.append(
            Quota(
                name=read.text(raw.get("name"), f"{path}.name"),
                parent=read.text(parent, f"{path}.parent") if parent is not None else None,
                min=_resources(read, raw["min"], f"{path}.min") if raw.get("min") is not None else {},
                max=_resources(read, raw["max"], f"{path}.max") if raw.get("max") is not None else None,
                pool=read.text(raw.get("resource_type") or inherited(raw.get("name")), f"{path}.resource_type"),
                preempt_within=read.flag(raw.get("preempt_within", False), f"{path}.preempt_within"),
            )
        )
    _unique(read, [q.name for q in quotas], "quotas", "quota")
    index = {q.name: i for i, q in enumerate(quotas)}
    for name, field, message in tree_problems(quotas, nodes):
        raise read.fail(f"quotas[{index[name]}].{field}", message)
    return quotas


def _idle_mode(read: Reader, value: Any, path: str) -> str:
    # YAML 1.1 reads a bare `off` as false.
    if value is False:
        return IDLE_OFF
    if isinstance(value, str) and value in IDLE_MODES:
        return value
    raise read.fail(path, f"unknown idle mode {kind(value)} (use off, acceptable or only)")


def _pods(read: Reader, value: Any, path: str) -> tuple[Pod, ...]:
    items = read.items(value, path)
    if not items:
        raise read.fail(path, "a job needs at least one pod")
    pods: list[Pod] = []
    for i, item in enumerate(items):
        ppath = f"{path}[{i}]"
        raw = read.mapping(item, ppath, POD_KEYS)
        gpu_type = raw.get("gpu_type")
        pod = Pod(
            role=read.text(raw.get("role", "worker"), f"{ppath}.role"),
            gpus=read.integer(raw.get("gpus", 0), f"{ppath}.gpus"),
            gpu_type=read.text(gpu_type, f"{ppath}.gpu_type") if gpu_type is not None else None,
            cpu_m=read.millicores(raw.get("cpu", 0), f"{ppath}.cpu"),
            memory_mib=read.mib(raw.get("memory_gib", 0), f"{ppath}.memory_gib"),
        )
        pods.extend([pod] * read.integer(raw.get("count", 1), f"{ppath}.count", low=1))
    models = sorted({p.gpu_type for p in pods if p.gpu_type})
    if len(models) > 1:
        raise read.fail(path, f"pods name different GPU models ({', '.join(models)}); a job uses one model")
    return tuple(pods)


def _jobs(read: Reader, items: list[Any], nodes: list[Node], quotas: list[Quota]) -> list[Job]:
    node_by_name = {n.name: n for n in nodes}
    quota_by_name = {q.name: q for q in quotas}
    jobs = [_job(read, i, item, node_by_name, quota_by_name) for i, item in enumerate(items)]
    _unique(read, [j.name for j in jobs], "jobs", "job")
    _check_nodes_hold_their_pods(read, jobs, node_by_name)
    return jobs


# Which states a key makes sense in (DESIGN §4).
STATE_KEYS = {
    "nodes": (RUNNING, TERMINATING, NOMINATED),
    "in_quota": (RUNNING, TERMINATING),
    "started_at": (RUNNING, TERMINATING),
    "checkpointed_at": (RUNNING,),
    "demoted": (RUNNING,),
}


def _job(read: Reader, i: int, item: Any, node_by_name: dict[str, Node], quota_by_name: dict[str, Quota]) -> Job:
    path = f"jobs[{i}]"
    raw = read.mapping(item, path, JOB_KEYS)
    name = read.text(raw.get("name"), f"{path}.name")
    quota_name = read.text(raw.get("quota"), f"{path}.quota")
    quota = quota_by_name.get(quota_name)
    if quota is None:
        raise read.fail(f"{path}.quota", f"unknown quota '{quota_name}'")
    pool = read.text(raw.get("resource_type", quota.pool), f"{path}.resource_type")
    if pool != quota.pool:
        raise read.fail(f"{path}.resource_type", f"job is in pool {pool} but its quota {quota.name} is in {quota.pool}")
    state = raw.get("state", PENDING)
    if state not in PHASES:
        raise read.fail(f"{path}.state", f"unknown state {kind(state)} (use {', '.join(PHASES)})")
    for key, states in STATE_KEYS.items():
        if key in raw and state not in states:
            raise read.fail(f"{path}.{key}", f"a {state} job has no {key} (only {', '.join(states)} jobs)")
    idle = _idle_mode(read, raw.get("idle", IDLE_OFF), f"{path}.idle")
    pods = _pods(read, raw.get("pods"), f"{path}.pods")
    pods, elastic = elastic_pods(read, raw, pods, path, state, idle)
    submitted_at = read.number(raw.get("submitted_at", i), f"{path}.submitted_at", low=None)
    job_nodes: tuple[str, ...] = ()
    if state != PENDING:
        job_nodes = _job_nodes(read, raw.get("nodes"), f"{path}.nodes", state, pods, pool, node_by_name)
    if state == NOMINATED and idle == IDLE_ONLY:
        raise read.fail(f"{path}.state", "an idle-only job is never nominated (nominations are In Quota)")
    in_quota = demoted = False
    started_at = None
    if state in (RUNNING, TERMINATING):
        in_quota = read.flag(raw.get("in_quota", idle != IDLE_ONLY), f"{path}.in_quota")
        if state == RUNNING and in_quota and idle == IDLE_ONLY:
            raise read.fail(f"{path}.in_quota", "an idle-only job never runs In Quota")
        demoted = read.flag(raw.get("demoted", False), f"{path}.demoted")
        if demoted and in_quota:
            raise read.fail(f"{path}.demoted", "a demoted job runs Not in Quota (in_quota: false)")
        if state == RUNNING and not in_quota and idle == IDLE_OFF and not demoted:
            raise read.fail(f"{path}.in_quota", "a job with idle off never runs Not in Quota")
        started_at = read.number(raw.get("started_at", submitted_at), f"{path}.started_at", low=None)
    time_limit_s = None
    if "time_limit_s" in raw:
        time_limit_s = read.number(raw["time_limit_s"], f"{path}.time_limit_s")
        if time_limit_s <= 0:
            raise read.fail(f"{path}.time_limit_s", "must be above 0 (leave it out for no limit)")
    checkpointed_at = None
    if raw.get("checkpointed_at") is not None:
        checkpointed_at = read.number(raw["checkpointed_at"], f"{path}.checkpointed_at", low=None)
    return Job(
        name=name, quota=quota_name, pods=pods,
        priority=read.integer(raw.get("priority", 1), f"{path}.priority", low=1, high=9),
        idle=idle, submitted_at=submitted_at, phase=state, in_quota=in_quota, started_at=started_at,
        nodes=job_nodes, checkpointed_at=checkpointed_at, demoted=demoted, time_limit_s=time_limit_s,
        elastic=elastic,
    )


def _check_nodes_hold_their_pods(read: Reader, jobs: list[Job], node_by_name: dict[str, Node]) -> None:
    """Running and terminating pods must fit their nodes (nominated ones only reserve)."""
    held: dict[str, list[int]] = {}
    for i, job in enumerate(jobs):
        if job.phase not in (RUNNING, TERMINATING):
            continue
        for k, (pod, name) in enumerate(zip(job.pods, job.nodes, strict=True)):
            amounts = held.setdefault(name, [0, 0, 0])
            amounts[0] += pod.gpus
            amounts[1] += pod.cpu_m
            amounts[2] += pod.memory_mib
            node = node_by_name[name]
            capacity = (node.gpus, node.cpu_m, node.memory_mib)
            for what, amount, cap in zip(("GPUs", "CPU", "memory"), amounts, capacity, strict=True):
                if amount > cap:
                    raise read.fail(f"jobs[{i}].nodes[{k}]", f"node {name} is over capacity ({what})")


def _job_nodes(
    read: Reader, value: Any, path: str, state: str, pods: tuple[Pod, ...], pool: str, node_by_name: dict[str, Node]
) -> tuple[str, ...]:
    if value is None:
        raise read.fail(path, f"a {state} job needs nodes: the node of each pod")
    names = [read.text(name, f"{path}[{k}]") for k, name in enumerate(read.items(value, path))]
    if len(names) != len(pods):
        raise read.fail(path, f"{len(names)} node(s) for {len(pods)} pod(s): name the node of each pod")
    gpu_models = set()
    for k, (pod, name) in enumerate(zip(pods, names, strict=True)):
        node = node_by_name.get(name)
        if node is None:
            raise read.fail(f"{path}[{k}]", f"unknown node '{name}'")
        if node.pool != pool:
            raise read.fail(f"{path}[{k}]", f"node {name} is in pool {node.pool}, the job in {pool}")
        if pod.gpu_type and node.gpu_type != pod.gpu_type:
            raise read.fail(f"{path}[{k}]", f"pod asks for {pod.gpu_type} but node {name} has {node.gpu_type or 'no GPUs'}")
        if pod.gpus:
            gpu_models.add(node.gpu_type)
    if len(gpu_models) > 1:
        raise read.fail(path, f"pods on different GPU models ({', '.join(sorted(gpu_models))}); a job uses one model")
    return tuple(names)


def _expect(read: Reader, value: Any, job_names: set[str]) -> dict[str, Any]:
    raw = read.mapping(value if value is not None else {}, "expect", EXPECT_KEYS)

    def known(name: Any, path: str) -> str:
        name = read.text(name, path)
        if name not in job_names:
            raise read.fail(path, f"unknown job '{name}'")
        return name

    expect: dict[str, Any] = {}
    if "admitted" in raw:
        admitted = read.mapping(raw["admitted"] or {}, "expect.admitted", tuple(raw["admitted"] or ()))
        expect["admitted"] = {}
        for name, entry in admitted.items():
            epath = f"expect.admitted.{name}"
            entry = read.mapping(entry or {}, epath, ("in_quota", "nodes"))
            want: dict[str, Any] = {}
            if "in_quota" in entry:
                want["in_quota"] = read.flag(entry["in_quota"], f"{epath}.in_quota")
            if "nodes" in entry:
                want["nodes"] = [read.text(n, f"{epath}.nodes[{k}]") for k, n in
                                 enumerate(read.items(entry["nodes"], f"{epath}.nodes"))]
            expect["admitted"][known(name, epath)] = want
    for key in EXPECT_LISTS:
        if key in raw:
            expect[key] = sorted(known(n, f"expect.{key}[{k}]") for k, n in
                                 enumerate(read.items(raw[key], f"expect.{key}")))
    if "reasons" in raw:
        reasons = read.mapping(raw["reasons"] or {}, "expect.reasons", tuple(raw["reasons"] or ()))
        expect["reasons"] = {
            known(name, f"expect.reasons.{name}"): read.text(text, f"expect.reasons.{name}")
            for name, text in reasons.items()
        }
    if "estimated_start" in raw:
        starts = read.mapping(raw["estimated_start"] or {}, "expect.estimated_start", tuple(raw["estimated_start"] or ()))
        expect["estimated_start"] = {
            known(name, f"expect.estimated_start.{name}"):
                None if start is None else read.number(start, f"expect.estimated_start.{name}", low=None)
            for name, start in starts.items()
        }
    expect.update(grown_and_shrunk(read, raw, known))
    return expect


# --- comparing ---------------------------------------------------------------------------------------


def compare(expect: Mapping[str, Any], got: Mapping[str, Any]) -> list[str]:
    """Readable differences between `expect` and the decisions' contract form; only keys in `expect`
    are compared, lists as sorted sets, reasons only for the jobs `expect` names."""
    diff: list[str] = []
    if "admitted" in expect:
        want, have = expect["admitted"], got["admitted"]
        for name in sorted(set(want) - set(have)):
            diff.append(f"admitted: {name} expected, but it was not admitted")
        for name in sorted(set(have) - set(want)):
            diff.append(f"admitted: {name} was admitted ({_show(have[name])}), not expected")
        for name in sorted(set(want) & set(have)):
            for field, value in want[name].items():
                if have[name][field] != value:
                    diff.append(f"admitted.{name}.{field}: expected {_show(value)}, got {_show(have[name][field])}")
    for key in EXPECT_LISTS:
        if key in expect and sorted(expect[key]) != sorted(got[key]):
            missing = sorted(set(expect[key]) - set(got[key]))
            extra = sorted(set(got[key]) - set(expect[key]))
            detail = "; ".join(
                part for part in (f"missing {', '.join(missing)}" if missing else "",
                                  f"unexpected {', '.join(extra)}" if extra else "") if part
            )
            diff.append(f"{key}: expected {_show(sorted(expect[key]))}, got {_show(sorted(got[key]))} ({detail})")
    for name, text in sorted(expect.get("reasons", {}).items()):
        have = got["reasons"].get(name)
        if have != text:
            diff.append(f"reasons.{name}: expected {text!r}, got {have!r}")
    for name, start in sorted(expect.get("estimated_start", {}).items()):
        if name not in got["estimated_start"]:
            diff.append(f"estimated_start.{name}: expected {_show(start)}, but it has no estimate (not pending)")
        elif got["estimated_start"][name] != start:
            diff.append(f"estimated_start.{name}: expected {_show(start)}, got {_show(got['estimated_start'][name])}")
    diff += compare_resizes(expect, got)
    return diff


def _show(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def run_file(path: str | Path) -> tuple[dict[str, Any], list[str] | None]:
    """The decisions of one file in contract form, and the diff against its `expect:` (None: no expect)."""
    scenario = load(path)
    got = run_cycle(scenario.snapshot).as_contract()
    return got, (compare(scenario.expect, got) if scenario.expect is not None else None)


def main(argv: Sequence[str], stdout: IO[str] | Any = None, stderr: IO[str] | Any = None) -> int:
    """Run scenario files: print each one's decisions as JSON and compare them with its `expect:`."""
    stdout = stdout if stdout is not None else sys.stdout
    stderr = stderr if stderr is not None else sys.stderr
    if not argv:
        stderr.write("usage: scenario FILE [FILE ...]\n")
        return 2
    code = 0
    for path in argv:
        try:
            got, diff = run_file(path)
        except ScenarioError as exc:
            stderr.write(f"{exc}\n")
            code = 2
            continue
        if len(argv) > 1:
            stdout.write(f"== {path} ==\n")
        stdout.write(json.dumps(got, indent=2) + "\n")
        if diff:
            stdout.write(f"{path}: decisions differ from expect:\n")
            for line in diff:
                stdout.write(f"  {line}\n")
            code = max(code, 1)
    return code


def cli() -> None:
    """Console entry point (`tidepool-scenario FILE...`), for use without Django."""
    sys.exit(main(sys.argv[1:]))

