"""Reasons keep their kind: every reason value carries a stable code next to its text, and the
engine hands out values (text is rendered only when read)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from scheduler.engine.cycle import run_cycle
from scheduler.engine.reasons import (
    MEMBER,
    REASON_CODES,
    STAFF,
    AnyModel,
    Asked,
    BothPaths,
    IdleOnly,
    NoIdleRoom,
    QuotaFull,
    Reason,
    Starving,
    WaitingForVictims,
    preemption_text,
    render,
    staff,
)
from scheduler.engine.types import IDLE_ACCEPTABLE, IDLE_ONLY, Job, Node, Pod, Quota, Snapshot
from scheduler.engine_tools.scenario import load

SCENARIOS = sorted((Path(__file__).resolve().parents[1] / "scenarios").glob("*.yaml"))
NODES = (Node("a", "A100", 8, 96000, 786432), Node("h", "H100", 8, 96000, 786432))
GPUS = {"gpu:A100": 8, "gpu:H100": 8}


def _codes(snapshot: Snapshot) -> dict[str, str]:
    decisions = run_cycle(snapshot)
    for name, reason in decisions.reasons.items():
        assert isinstance(reason, Reason), name
        assert reason.code in REASON_CODES, (name, reason.code)
        assert str(reason) == decisions.as_contract()["reasons"][name]
    return {name: reason.code for name, reason in decisions.reasons.items()}


def test_each_kind_has_its_code():
    quotas = (
        Quota("root", None),
        Quota("small", "root", {"gpu:A100": 2, "gpu:H100": 2}),
        Quota("capped", "root", {"gpu:A100": 4}, max={"gpu:A100": 4}),
        Quota("big", "root", {"gpu:A100": 2, "gpu:H100": 2}),
    )
    jobs = (
        Job("running", "big", (Pod("w", 8, "A100"),), phase="running", in_quota=False, idle=IDLE_ONLY,
            nodes=("a",)),
        Job("full", "small", (Pod("w", 4, "A100"),)),
        Job("no-model", "small", (Pod("w", 4),)),
        Job("capped", "capped", (Pod("w", 5, "A100"),), idle=IDLE_ONLY),
        Job("both", "small", (Pod("w", 4, "A100"),), idle=IDLE_ACCEPTABLE),
        Job("idle", "big", (Pod("w", 8, "H100"),), idle=IDLE_ONLY, submitted_at=-1),
        Job("too-big", "big", (Pod("w", 16, "A100"),)),
        Job("lost", "gone", (Pod("w", 1, "A100"),)),
    )
    codes = _codes(Snapshot(NODES, quotas, jobs))
    assert codes == {
        "full": "quota_full",
        "no-model": "quota_full",  # full on both models: the parts share a code
        "capped": "max_reached",  # an `only` job: its idle reason's code
        "both": "quota_and_idle",
        "too-big": "never_fits",
        "lost": "unknown_quota",
    }, codes
    # `idle` took H100 node h; an In Quota job of `big` now must reclaim `running` on a and waits for it
    jobs = (*jobs, Job("owner", "big", (Pod("w", 2, "A100"),)))
    assert _codes(Snapshot(NODES, quotas, jobs))["owner"] == "waiting_for_victims"


def test_codes_of_every_scenario_file():
    seen: Counter[str] = Counter()
    for path in SCENARIOS:
        seen.update(_codes(load(path).snapshot).values())
    assert set(seen) <= set(REASON_CODES)
    for code in ("quota_full", "max_reached", "no_capacity", "no_idle_capacity", "waiting_for_victims",
                 "never_fits", "quota_and_idle"):
        assert seen[code], f"no scenario file shows a {code} reason"


def test_preemption_reason_built_when_read():
    quotas = (Quota("root", None), Quota("t", "root", {"gpu:A100": 8}), Quota("b", "root"))
    jobs = (
        Job("borrower", "b", (Pod("w", 8, "A100"),), phase="running", in_quota=False, idle=IDLE_ONLY,
            nodes=("a",)),
        Job("owner", "t", (Pod("w", 8, "A100"),)),
    )
    preemption = run_cycle(Snapshot(NODES, quotas, jobs)).preempted["borrower"]
    assert (preemption.for_job, preemption.by_quota) == ("owner", "t")
    assert preemption_text(preemption, STAFF) == "reclaimed by quota t for job owner"
    assert preemption.kind == "reclaim" and preemption.code == "reclaimed"
    assert preemption_text(preemption, MEMBER) == "reclaimed for a queued job of quota t"  # names no job
    assert preemption_text(preemption, staff(str.upper)) == "reclaimed by quota t for job OWNER"


def test_a_member_reads_how_many_jobs_are_waited_for_and_staff_read_which():
    waiting = WaitingForVictims(("a#3", "b#4"))
    assert render(waiting, MEMBER) == "waiting for 2 preempted jobs to exit"
    assert render(WaitingForVictims(("a#3",)), MEMBER) == "waiting for 1 preempted job to exit"
    assert render(waiting, staff(lambda key: key.split("#")[0])) == "waiting for 2 job(s) to exit: a, b"
    assert str(waiting) == "waiting for 2 job(s) to exit: a#3, b#4"  # the engine's own keys (scenario files)


def test_combined_reasons_render_each_part_for_the_same_reader():
    quota = QuotaFull("team-a", "gpu:A100", 8, 2, 16)
    both = BothPaths(quota, IdleOnly(NoIdleRoom(Asked(1, 8, "A100", 0, 0, True))))
    member = render(both, MEMBER)
    assert member == str(both) == ("quota team-a full: needs 8 A100, 2 left of 16; idle resources: idle mode only: "
                                   "no free unreserved capacity for 8 A100")
    assert render(AnyModel((quota, Starving(quota, ("n1",)))), MEMBER).startswith("quota team-a full")
    assert both.code == "quota_and_idle" and both.in_quota.code == "quota_full"
