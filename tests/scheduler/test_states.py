"""scheduler/states.py: the lifecycle's transition table, the one predicate per question, and the
event kinds (every kind the code writes or styles is an EventKind)."""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import pytest

from scheduler import states
from scheduler.models import REQUEUED_PREEMPTED, Job, Pod
from scheduler.states import (
    JOB_TRANSITIONS,
    POD_TRANSITIONS,
    EventKind,
    IllegalTransition,
    JobStatus,
    PodOutcome,
    PodStatus,
    PreemptedPhase,
    check_job_transition,
    check_pod_transition,
)
from tests.factories import JobFactory

ROOT = Path(__file__).resolve().parents[2]
J = JobStatus

# -- The transition table ---------------------------------------------------------------------


def test_every_status_has_a_row():
    assert set(JOB_TRANSITIONS) == set(JobStatus)
    assert set(POD_TRANSITIONS) == set(PodStatus)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (J.QUEUING, J.ENV_PREPARING),  # admitted
        (J.PREEMPTED, J.ENV_PREPARING),  # requeued, admitted again
        (J.ENV_PREPARING, J.RUNNING),
        (J.RUNNING, J.PREEMPTED),
        (J.RUNNING, J.SUCCEEDED),
        (J.RUNNING, J.RESTARTING),
        (J.RUNNING, J.QUEUING),  # a pod never started: requeued
        (J.RESTARTING, J.QUEUING),
        (J.PREEMPTED, J.STOPPING),  # stopped while its pods exit
        (J.STOPPING, J.STOPPED),
        (J.FAILED, J.QUEUING),  # restarted by a person
        (J.PREEMPTED, J.QUEUING),  # a held Preempted job restarted
    ],
)
def test_the_table_allows_the_lifecycle(old, new):
    check_job_transition(old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (J.SUCCEEDED, J.RUNNING),
        (J.STOPPED, J.PREEMPTED),
        (J.STOPPING, J.RUNNING),
        (J.QUEUING, J.RUNNING),  # never without EnvPreparing
        (J.QUEUING, J.PREEMPTED),  # nothing to preempt
        (J.RESTARTING, J.ENV_PREPARING),  # back to Queuing first
        (J.PREEMPTED, J.PREEMPTED),
        (J.RUNNING, J.RUNNING),
    ],
)
def test_the_table_refuses_an_illegal_job_transition(old, new):
    with pytest.raises(IllegalTransition, match=f"a job cannot go from {old} to {new}: from {old} it goes only to"):
        check_job_transition(old, new)


def test_a_pod_moves_only_forward():
    check_pod_transition(PodStatus.PENDING, PodStatus.RUNNING)
    check_pod_transition(PodStatus.PENDING, PodStatus.STOPPED)  # never started
    for end in (PodStatus.SUCCEEDED, PodStatus.FAILED, PodStatus.PREEMPTED, PodStatus.STOPPED):
        check_pod_transition(PodStatus.RUNNING, end)
        with pytest.raises(IllegalTransition, match=f"from {end} it goes only to nothing \\(it is final\\)"):
            check_pod_transition(end, PodStatus.RUNNING)
    with pytest.raises(IllegalTransition, match="a pod cannot go from Running to Pending"):
        check_pod_transition(PodStatus.RUNNING, PodStatus.PENDING)


def test_an_unknown_status_is_named():
    with pytest.raises(IllegalTransition, match="'Paused' is not a valid JobStatus; the statuses are Creating"):
        check_job_transition(J.RUNNING, "Paused")


def test_move_to_checks_before_it_changes_anything():
    job = Job(status=J.SUCCEEDED)
    with pytest.raises(IllegalTransition):
        job.move_to(J.RUNNING)
    assert job.status == J.SUCCEEDED
    job.move_to(J.QUEUING)
    assert job.status == J.QUEUING
    pod = Pod(status=PodStatus.FAILED)
    with pytest.raises(IllegalTransition):
        pod.move_to(PodStatus.RUNNING)
    assert pod.status == PodStatus.FAILED


def _status_writes(tree: ast.AST) -> list[int]:
    """Lines that assign `<x>.status = …` or pass `status=` to a queryset's update()."""
    lines = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AugAssign | ast.AnnAssign) else []
        lines += [node.lineno for t in targets if isinstance(t, ast.Attribute) and t.attr == "status"]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update":
            lines += [node.lineno for k in node.keywords if k.arg == "status"]
    return lines


def test_statuses_change_only_through_move_to():
    """Every status write of the domain goes through Job.move_to / Pod.move_to (which check the
    table); the admissions' batched UPDATE checks each job with check_job_transition itself."""
    found = []
    for path in sorted((ROOT / "scheduler").rglob("*.py")):
        if {"migrations", "engine", "simulator", "management"} & set(path.parts):
            continue  # no database status there (the engine and the replay have phases of their own)
        for line in _status_writes(ast.parse(path.read_text(encoding="utf-8"))):
            found.append(f"{path.relative_to(ROOT)}:{line}")
    assert [f for f in found if not f.startswith("scheduler/models/core.py:")] == []
    assert len(found) == 2  # the two move_to methods
    scheduling = (ROOT / "scheduler/services/scheduling.py").read_text(encoding="utf-8")
    assert 'check_job_transition(job.status, fields["status"])' in scheduling
    assert _status_writes(ast.parse("job.status = 'Running'\nq.update(status='Running')\n")) == [1, 2]


# -- One predicate per question ---------------------------------------------------------------

# (status, stop_outcome, finished) → the Preempted phase; the states every question is asked of.
ROWS = [
    *[(status, "", False) for status in JobStatus if status != J.PREEMPTED],
    (J.SUCCEEDED, "", True),
    (J.STOPPED, PodOutcome.STOPPED, True),
    (J.STOPPING, PodOutcome.STOPPED, False),
    (J.RUNNING, PodOutcome.FAILED, False),  # a failed attempt settling
    (J.PREEMPTED, PodOutcome.PREEMPTED, False),  # exiting
    (J.PREEMPTED, "", False),  # requeued
    (J.PREEMPTED, "", True),  # held
]

PHASE = {
    (J.PREEMPTED, PodOutcome.PREEMPTED, False): PreemptedPhase.EXITING,
    (J.PREEMPTED, "", False): PreemptedPhase.REQUEUED,
    (J.PREEMPTED, "", True): PreemptedPhase.HELD,
}
WAITING = {J.CREATING, J.QUEUING, J.RESTARTING}
HOLDS = {J.ENV_PREPARING, J.RUNNING, J.STOPPING}
FINAL = {J.SUCCEEDED, J.FAILED, J.STOPPED}


@pytest.mark.parametrize(("status", "outcome", "finished"), ROWS)
def test_each_question_has_one_answer_per_state(status, outcome, finished):
    phase = PHASE.get((status, outcome, finished))
    assert states.preempted_phase(status, outcome, finished=finished) is phase
    assert states.resumes_automatically(status, outcome, finished=finished) == (phase is PreemptedPhase.REQUEUED)
    assert states.stays_preempted(status, outcome, finished=finished) == (phase is PreemptedPhase.HELD)
    assert states.preempted_exiting(status, outcome) == (phase is PreemptedPhase.EXITING)
    assert states.is_waiting(status, outcome, finished=finished) == (
        status in WAITING or phase is PreemptedPhase.REQUEUED)
    assert states.holds_capacity(status, outcome) == (status in HOLDS or phase is PreemptedPhase.EXITING)
    assert states.is_started(status) == (status in (J.ENV_PREPARING, J.RUNNING))
    assert states.is_final(status) == (status in FINAL)
    assert states.is_active(status) == (status not in FINAL)
    # Stop: anything unfinished but Stopping and a held Preempted job; Restart: the opposite ones.
    assert states.can_stop(status, outcome, finished=finished) == (
        status not in FINAL and status != J.STOPPING and phase is not PreemptedPhase.HELD)
    assert states.can_restart(status, outcome, finished=finished) == (
        status in FINAL or phase is PreemptedPhase.HELD)


def test_after_a_preemption_fault_tolerance_decides():
    assert states.phase_after_preemption(fault_tolerance=True) is PreemptedPhase.REQUEUED
    assert states.phase_after_preemption(fault_tolerance=False) is PreemptedPhase.HELD


@pytest.mark.django_db
def test_the_requeued_query_and_the_predicate_agree():
    """selectors filter with models.REQUEUED_PREEMPTED; the model's properties call the predicate."""
    from django.utils import timezone

    now = timezone.now()
    jobs = {(status, outcome, finished): JobFactory(status=status, stop_outcome=outcome,
                                                    finished_at=now if finished else None)
            for status, outcome, finished in ROWS}
    queried = set(Job.objects.filter(REQUEUED_PREEMPTED).values_list("pk", flat=True))
    assert queried == {job.pk for job in jobs.values() if job.resumes_automatically}
    assert queried == {jobs[(J.PREEMPTED, "", False)].pk}
    held = jobs[(J.PREEMPTED, "", True)]
    assert held.stays_preempted and not held.is_waiting and held.preempted_phase is PreemptedPhase.HELD


# -- Event kinds -------------------------------------------------------------------------------

_EVENT_CALLS = {"job_event": 1}  # function name → index of its kind argument


def event_kinds_in(source: str) -> list[tuple[int, str]]:
    """(line, kind) for every event kind a module names: the kind argument of job_event, the first
    item of each job_events entry, `kind=` on a JobEvent (or a filter of events), a comparison with
    `<x>.kind`. A kind that is an EventKind member gives `EventKind.<NAME>`; a literal, its text."""
    found: list[tuple[int, str]] = []

    def kind_of(node: ast.expr) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "EventKind":
            return f"EventKind.{node.attr}"
        return None

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in _EVENT_CALLS and len(node.args) > _EVENT_CALLS[name]:
                found.append((node.lineno, kind_of(node.args[_EVENT_CALLS[name]]) or "<computed>"))
            if name == "job_events" and len(node.args) > 1 and isinstance(node.args[1], ast.List | ast.Tuple):
                for entry in node.args[1].elts:
                    if isinstance(entry, ast.Tuple) and entry.elts:
                        found.append((entry.lineno, kind_of(entry.elts[0]) or "<computed>"))
            callee = ast.unparse(node.func)
            if "JobEvent" in callee or "events" in callee:
                found += [(node.lineno, k) for kw in node.keywords if kw.arg in ("kind", "kind__in")
                          and (k := kind_of(kw.value))]
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(isinstance(side, ast.Attribute) and side.attr == "kind" for side in sides):
                found += [(node.lineno, k) for side in sides if (k := kind_of(side))]
    return found


def _code_files() -> list[Path]:
    return sorted(p for package in ("scheduler", "console") for p in (ROOT / package).rglob("*.py")
                  if "migrations" not in p.parts)


def test_every_event_kind_in_the_code_is_an_event_kind():
    wrong, seen = [], set()
    for path in _code_files():
        for line, kind in event_kinds_in(path.read_text(encoding="utf-8")):
            seen.add(kind)
            member = kind.removeprefix("EventKind.")
            if not (kind.startswith("EventKind.") and member in EventKind.__members__):
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {kind} (name it EventKind.<KIND> in scheduler/states.py)")
    assert wrong == []
    assert {"EventKind.NODE_LOST", "EventKind.PREEMPTED", "EventKind.QUEUED"} <= seen  # the scan reads the code


def test_every_styled_event_kind_is_an_event_kind():
    """The timeline styles events by `event-<kind>` (templates/console/_job_live.html)."""
    css = "".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "static").rglob("*.css")))
    styled = set(re.findall(r"\.event-([a-z][a-z-]*)", css))
    assert styled and styled <= {kind.value for kind in EventKind}, styled - {kind.value for kind in EventKind}


def test_the_scan_finds_a_kind_written_as_text():
    source = textwrap.dedent("""
        job_event(job, "node-lost", reason)
        job_event(job, EventKind.QUEUED, "queuing")
        job_events(job, [(EventKind.SUBMITTED, "x"), ("typo", "y")])
        JobEvent.objects.filter(kind="preempted")
        if event.kind == "stopped": pass
    """)
    assert event_kinds_in(source) == [
        (2, "node-lost"), (3, "EventKind.QUEUED"), (4, "EventKind.SUBMITTED"), (4, "typo"), (5, "preempted"),
        (6, "stopped"),
    ]
