"""PodSupervisor: real processes, real signals.

Every test runs under the `pods` fixture, which fails the test if any process it started
(leader, child or grandchild) is still alive afterwards, or if an exit was reported twice.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from scheduler.node.runtime.process import PodSpec, TerminateResult, pod_environment

# Waits for SIGTERM, then takes a moment to "save" before exiting 0, like a training script.
GRACEFUL = """
import signal, sys, time
def on_term(signum, frame):
    print("got SIGTERM", flush=True)
    time.sleep(0.2)
    print("saved, exiting", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
print("ready", flush=True)
while True:
    time.sleep(0.05)
"""

IGNORES_SIGTERM = "trap '' TERM; echo ready; while :; do sleep 0.05; done"


def graceful_pod(pods, pod_id: int = 1, attempt: int = 1) -> PodSpec:
    script = pods.root / "graceful.py"
    script.write_text(GRACEFUL)
    return pods.spec(pods.python(script), pod_id=pod_id, attempt=attempt)


# -- environment ----------------------------------------------------------------------------


def test_pod_environment_sets_tidepool_variables_over_the_jobs(pods) -> None:
    spec = pods.spec("true", gpu_indices=(2, 5), rank=3, world_size=4, env={"RANK": "99", "FOO": "bar"})
    env = pod_environment(spec, base={"PATH": "/bin", "CUDA_VISIBLE_DEVICES": "0,1,2,3"})

    assert env["CUDA_VISIBLE_DEVICES"] == "2,5"
    assert env["RANK"] == "3"  # the job cannot give itself another rank
    assert env["WORLD_SIZE"] == "4"
    assert env["FOO"] == "bar"
    assert env["PATH"] == "/bin"
    assert env["TIDEPOOL_CHECKPOINT_DIR"] == spec.checkpoint_dir
    assert env["TIDEPOOL_PROGRESS_FILE"] == spec.progress_path
    assert env["PYTHONUNBUFFERED"] == "1"


@pytest.mark.parametrize(("gpus", "visible"), [((2, 5), "2,5"), ((), "")])
def test_process_sees_the_recorded_environment(
    pods, monkeypatch: pytest.MonkeyPatch, gpus: tuple[int, ...], visible: str
) -> None:
    monkeypatch.setenv("TIDEPOOL_TEST_INHERITED", "from-the-worker")
    monkeypatch.setenv("SECRET_KEY", "worker-secret")
    script = pods.root / "dump_env.py"
    # Relative output path: the pod runs in its workdir.
    script.write_text(
        "import json, os\njson.dump({'cwd': os.getcwd(), 'env': dict(os.environ)}, open('env.json', 'w'))\n"
    )
    spec = pods.spec(
        pods.python(script),
        gpu_indices=gpus,
        rank=1,
        world_size=2,
        master_addr="10.0.0.7",
        master_port=23456,
        restart_count=2,
        attempt=3,
        env={"FOO": "bar", "CUDA_VISIBLE_DEVICES": "7"},
    )
    pods.start(spec)
    assert pods.wait_exit(spec).outcome == "succeeded"

    seen = json.loads((Path(spec.workdir) / "env.json").read_text())
    assert seen["cwd"] == os.path.realpath(spec.workdir)
    env = seen["env"]
    expected = {
        "CUDA_VISIBLE_DEVICES": visible,
        "RANK": "1",
        "WORLD_SIZE": "2",
        "MASTER_ADDR": "10.0.0.7",
        "MASTER_PORT": "23456",
        "TIDEPOOL_JOB_ID": str(spec.job_id),
        "TIDEPOOL_POD_ID": str(spec.pod_id),
        "TIDEPOOL_ATTEMPT": "3",
        "TIDEPOOL_CHECKPOINT_DIR": spec.checkpoint_dir,
        "TIDEPOOL_RESTART_COUNT": "2",
        "TIDEPOOL_PROGRESS_FILE": spec.progress_path,
        "PYTHONUNBUFFERED": "1",
        "FOO": "bar",
        "PATH": os.environ["PATH"],  # on the allow-list
    }
    assert {key: env.get(key) for key in expected} == expected
    # Built from nothing: the worker's other variables never reach the pod.
    assert "TIDEPOOL_TEST_INHERITED" not in env and "SECRET_KEY" not in env
    recorded = pod_environment(spec)
    assert {key: env[key] for key in expected} == {key: recorded[key] for key in expected}
    assert Path(spec.checkpoint_dir).is_dir()


# -- exits and logs -------------------------------------------------------------------------


def test_log_captures_stdout_and_stderr_and_a_failure_is_reported(pods) -> None:
    spec = pods.spec("echo to-stdout; echo to-stderr >&2; exit 3")
    pods.start(spec)
    result = pods.wait_exit(spec)

    assert (result.exit_code, result.outcome, result.killed) == (3, "failed", False)
    assert pods.reports_for(spec) == [(spec.pod_id, spec.attempt, 3, "failed")]
    lines = Path(spec.log_path).read_text().splitlines()
    assert lines[0].startswith(f"=== tidepool: pod {spec.pod_id} (job {spec.job_id}) attempt 1")
    assert lines[1:3] == ["to-stdout", "to-stderr"]
    assert "exited with code 3 (failed)" in lines[3]


def test_exit_zero_is_succeeded_and_attempts_append_to_the_log(pods) -> None:
    first = pods.spec("echo first run; exit 7", log_path=str(pods.root / "pod.log"))
    second = pods.spec("echo second run", attempt=2, log_path=str(pods.root / "pod.log"))
    pods.start(first)
    pods.wait_exit(first)
    pods.start(second)

    assert pods.wait_exit(second).outcome == "succeeded"
    assert pods.reports_for(second) == [(second.pod_id, 2, 0, "succeeded")]
    log = Path(second.log_path).read_text()
    assert log.index("first run") < log.index("attempt 2") < log.index("second run")


def test_command_not_found_fails(pods) -> None:
    spec = pods.spec("no-such-command-tidepool")
    pods.start(spec)
    result = pods.wait_exit(spec)
    assert (result.exit_code, result.outcome) == (127, "failed")


# -- termination ----------------------------------------------------------------------------


def test_terminate_sends_sigterm_and_a_graceful_exit_is_preempted(pods) -> None:
    spec = graceful_pod(pods)
    pods.start(spec)
    pods.wait_for_log(spec, "ready")

    started = time.monotonic()
    assert pods.supervisor.terminate(spec.pod_id, spec.attempt, grace_s=10) == TerminateResult.TERMINATING
    result = pods.wait_exit(spec)

    assert time.monotonic() - started < 10  # left on its own, within the grace period
    assert (result.exit_code, result.outcome, result.killed) == (0, "preempted", False)
    assert pods.reports_for(spec) == [(spec.pod_id, spec.attempt, 0, "preempted")]
    log = Path(spec.log_path).read_text()
    assert "got SIGTERM" in log and "saved, exiting" in log


def test_terminate_with_outcome_stopped(pods) -> None:
    spec = graceful_pod(pods)
    pods.start(spec)
    pods.wait_for_log(spec, "ready")
    pods.supervisor.terminate(spec.pod_id, spec.attempt, grace_s=10, outcome="stopped")
    assert pods.wait_exit(spec).outcome == "stopped"


def test_terminate_with_outcome_shrunk(pods) -> None:
    # DESIGN §2c: a shrink terminates an elastic job's extra pods only (it was refused here, so a live shrink
    # never reached its pods)
    spec = graceful_pod(pods)
    pods.start(spec)
    pods.wait_for_log(spec, "ready")
    pods.supervisor.terminate(spec.pod_id, spec.attempt, grace_s=10, outcome="shrunk")
    assert pods.wait_exit(spec).outcome == "shrunk"


def test_terminate_rejects_an_unknown_outcome(pods) -> None:
    with pytest.raises(ValueError):
        pods.supervisor.terminate(1, 1, grace_s=1, outcome="succeeded")


def test_a_pod_ignoring_sigterm_is_killed_after_the_grace_period(pods) -> None:
    spec = pods.spec(IGNORES_SIGTERM)
    pods.start(spec)
    pods.wait_for_log(spec, "ready")

    started = time.monotonic()
    pods.supervisor.terminate(spec.pod_id, spec.attempt, grace_s=1)
    result = pods.wait_exit(spec)
    elapsed = time.monotonic() - started

    assert 1.0 <= elapsed < 10
    assert (result.exit_code, result.outcome, result.killed) == (-9, "preempted", True)
    assert pods.reports_for(spec) == [(spec.pod_id, spec.attempt, -9, "preempted")]
    assert "(preempted, killed)" in Path(spec.log_path).read_text()


def test_grandchildren_get_the_grace_period_then_sigkill(pods) -> None:
    # The leader's subshell starts a grandchild that ignores SIGTERM, then the leader waits.
    # On SIGTERM the shells die at once; the grandchild keeps the group alive until the grace
    # period ends, and the exit is only reported once it is gone.
    spec = pods.spec(
        "( sh -c \"trap '' TERM; exec sleep 300\" & echo $! > grandchild.pid; wait ) & "
        "while [ ! -s grandchild.pid ]; do sleep 0.01; done; echo ready; wait"
    )
    pods.start(spec)
    pods.wait_for_log(spec, "ready")
    grandchild = int((Path(spec.workdir) / "grandchild.pid").read_text())
    assert pods.alive(grandchild)

    started = time.monotonic()
    pods.supervisor.terminate(spec.pod_id, spec.attempt, grace_s=1)
    result = pods.wait_exit(spec)

    assert not pods.alive(grandchild)  # already at the moment the exit is known
    assert time.monotonic() - started >= 1.0
    assert (result.outcome, result.killed) == ("preempted", True)


def test_leftovers_of_a_finished_pod_are_killed(pods) -> None:
    spec = pods.spec("sleep 300 & echo $! > background.pid; exit 0")
    pods.start(spec)
    result = pods.wait_exit(spec)

    background = int((Path(spec.workdir) / "background.pid").read_text())
    assert not pods.alive(background)
    assert (result.exit_code, result.outcome) == (0, "succeeded")


def test_terminate_is_idempotent_and_the_exit_is_reported_once(pods) -> None:
    spec = graceful_pod(pods)
    pods.start(spec)
    pods.wait_for_log(spec, "ready")

    sup = pods.supervisor
    assert sup.terminate(spec.pod_id, spec.attempt, grace_s=10) == TerminateResult.TERMINATING
    assert sup.terminate(spec.pod_id, spec.attempt, grace_s=0, outcome="stopped") == (
        TerminateResult.ALREADY_TERMINATING
    )
    result = pods.wait_exit(spec)
    assert (result.outcome, result.killed) == ("preempted", False)  # the first call's terms stand
    assert sup.terminate(spec.pod_id, spec.attempt, grace_s=10) == TerminateResult.EXITED
    assert Path(spec.log_path).read_text().count("got SIGTERM") == 1
    assert len(pods.reports_for(spec)) == 1


def test_terminate_for_an_older_attempt_is_ignored(pods) -> None:
    spec = graceful_pod(pods, pod_id=7, attempt=2)
    pid = pods.start(spec)
    pods.wait_for_log(spec, "ready")

    assert pods.supervisor.terminate(7, 1, grace_s=0) == TerminateResult.STALE
    assert pods.alive(pid)
    assert [(p.pod_id, p.attempt, p.terminating) for p in pods.supervisor.running()] == [(7, 2, None)]

    assert pods.supervisor.terminate(7, 2, grace_s=10) == TerminateResult.TERMINATING
    result = pods.wait_exit(spec)
    assert (result.attempt, result.outcome, result.exit_code) == (2, "preempted", 0)
    assert Path(spec.log_path).read_text().count("got SIGTERM") == 1


def test_terminate_before_start_fences_that_attempt(pods) -> None:
    # The stop command overtook the start task in the node's queue.
    sup = pods.supervisor
    assert sup.terminate(9, 1, grace_s=10) == TerminateResult.NOT_STARTED
    assert sup.terminate(9, 1, grace_s=10) == TerminateResult.NOT_STARTED
    assert sup.start(pods.spec("echo should-not-run", pod_id=9, attempt=1)) is False
    assert sup.running() == []

    retry = pods.spec("echo attempt two", pod_id=9, attempt=2)
    pods.start(retry)
    assert pods.wait_exit(retry).outcome == "succeeded"
    assert pods.reports_for(pods.spec("", pod_id=9, attempt=1)) == []


def test_a_start_is_never_run_twice(pods) -> None:
    script = pods.root / "wait_for_file.py"
    script.write_text("import os, time\nwhile not os.path.exists('go'):\n    time.sleep(0.01)\n")
    spec = pods.spec(pods.python(script))
    pods.start(spec)

    assert pods.supervisor.start(spec) is False  # redelivered while running
    (Path(spec.workdir) / "go").touch()
    pods.wait_exit(spec)
    assert pods.supervisor.start(spec) is False  # redelivered after it finished
    assert Path(spec.log_path).read_text().count("=== tidepool: pod 1 (job 101) attempt 1") == 1


def test_a_newer_attempt_supersedes_an_older_one_still_running(pods) -> None:
    old = pods.spec(IGNORES_SIGTERM, pod_id=5, attempt=1)
    new = pods.spec("echo new attempt", pod_id=5, attempt=2)
    pods.start(old)
    pods.wait_for_log(old, "ready")
    pods.start(new)

    old_exit = pods.wait_exit(old)
    assert (old_exit.outcome, old_exit.exit_code, old_exit.killed) == ("stopped", -9, True)
    assert pods.wait_exit(new).outcome == "succeeded"
    assert pods.supervisor.terminate(5, 1, grace_s=1) == TerminateResult.STALE
    assert pods.supervisor.start(old) is False


def test_shutdown_terminates_every_pod_and_refuses_new_ones(pods) -> None:
    graceful = graceful_pod(pods, pod_id=1)
    stubborn = pods.spec(IGNORES_SIGTERM, pod_id=2)
    for spec in (graceful, stubborn):
        pods.start(spec)
        pods.wait_for_log(spec, "ready")

    assert pods.supervisor.shutdown(grace_s=1) is True

    assert pods.supervisor.running() == []
    assert sorted(pods.reports) == [(1, 1, 0, "preempted"), (2, 1, -9, "preempted")]
    with pytest.raises(RuntimeError):
        pods.supervisor.start(pods.spec("true", pod_id=3))


def test_exits_are_polled_once_without_a_callback(polled_pods) -> None:
    spec = polled_pods.spec("exit 4")
    polled_pods.start(spec)
    assert polled_pods.wait_exit(spec).exit_code == 4

    polled = polled_pods.supervisor.poll()
    assert [(e.pod_id, e.attempt, e.exit_code, e.outcome) for e in polled] == [(1, 1, 4, "failed")]
    assert polled_pods.supervisor.poll() == []


def test_running_lists_pods_until_their_exit_is_reported(pods) -> None:
    spec = graceful_pod(pods, pod_id=3)
    pid = pods.start(spec)
    pods.wait_for_log(spec, "ready")
    [pod] = pods.supervisor.running()
    assert (pod.pod_id, pod.job_id, pod.attempt, pod.pid, pod.terminating) == (3, 103, 1, pid, None)

    pods.supervisor.terminate(3, 1, grace_s=10)
    pods.wait_exit(spec)
    pods.wait_until(lambda: pods.reports_for(spec), what="the exit report")
    assert pods.supervisor.running() == []


def test_a_failing_callback_does_not_break_the_supervisor(pods) -> None:
    pods.callback_error = RuntimeError("bug in the caller's callback")
    first = pods.spec("exit 0", pod_id=1)
    pods.start(first)
    assert pods.wait_exit(first).outcome == "succeeded"

    # The watcher survived its callback's exception: bookkeeping is done, later pods still work.
    pods.wait_until(lambda: pods.supervisor.running() == [], what="the first pod to leave running()")
    second = pods.spec("exit 1", pod_id=2)
    pods.start(second)
    assert pods.wait_exit(second).outcome == "failed"
    assert sorted(pods.reports) == [(1, 1, 0, "succeeded"), (2, 1, 1, "failed")]


# -- isolation: environment, exit file ---------------------------------------------------------


def test_pod_environment_is_built_from_the_allow_list_only(pods) -> None:
    spec = pods.spec("true", env={"MY_VAR": "x"}, env_allow=("PATH", "LC_*"))
    worker = {"PATH": "/usr/bin", "LC_ALL": "C.UTF-8", "SECRET_KEY": "s", "DATABASE_URL": "postgres://x",
              "REDIS_URL": "redis://x", "HOME": "/root"}
    from scheduler.node.runtime.sandbox import inherited_environment

    env = pod_environment(spec, base=inherited_environment(spec.env_allow, worker), home="/home/pod")
    assert env["PATH"] == "/usr/bin" and env["LC_ALL"] == "C.UTF-8" and env["MY_VAR"] == "x"
    assert env["HOME"] == "/home/pod"
    assert not {"SECRET_KEY", "DATABASE_URL", "REDIS_URL"} & set(env)


@pytest.mark.parametrize(("command", "code"), [("exit 0", 0), ("exit 3", 3), ("exec sh -c 'exit 5'", 5)])
def test_the_pods_shell_writes_its_exit_status_to_the_exit_file(pods, command, code) -> None:
    from scheduler.node.runtime.sandbox import read_exit_file

    exit_path = str(pods.root / "pod.exit")
    spec = pods.spec(command, exit_path=exit_path)
    pods.start(spec)
    assert pods.wait_exit(spec).exit_code == code
    assert read_exit_file(exit_path) == code


def test_the_exit_file_holds_the_programs_status_after_sigterm(pods) -> None:
    from scheduler.node.runtime.sandbox import read_exit_file

    exit_path = str(pods.root / "graceful.exit")
    spec = graceful_pod(pods)
    spec = pods.spec(spec.command, exit_path=exit_path)
    pods.start(spec)
    wait_for_log = time.monotonic() + 10
    while "ready" not in Path(spec.log_path).read_text() and time.monotonic() < wait_for_log:
        time.sleep(0.05)
    pods.supervisor.terminate(spec.pod_id, spec.attempt, grace_s=10, outcome="preempted")
    assert pods.wait_exit(spec).exit_code == 0
    assert read_exit_file(exit_path) == 0  # the program saved and exited 0; the shell recorded it
