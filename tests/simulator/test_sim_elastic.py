"""Elastic jobs in a replay (DESIGN §2c, `--elastic`): the declared model (simulator/elastic.py), runs whose
throughput depends on their size (work.Run.rate), a shrink that keeps a borrower running where a plain job
is preempted whole, growths into idle capacity, what resizes cost, and replays without elastic jobs that do
not change.

Unless a test says otherwise: cycle 10 s, grace 30 s, checkpoints every 600 s of work, the first one interval
in, free saves, a 60 s restart after a preemption or resize, growth interval 300 s (the engine's default).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace
from functools import partial

import pytest

from scheduler.engine.cycle import run_cycle
from scheduler.simulator import cli
from scheduler.simulator.elastic import elastic_pods, is_elastic, min_pods, shape_of, throughput
from scheduler.simulator.metrics import elastic_comparison, figures
from scheduler.simulator.replay import ReplayConfig, _Replay, replay
from scheduler.simulator.work import Run, RunRecord
from tests.simulator.test_sim_replay import cluster, job, random_trace

COSTS = {"checkpoint_cost_s": 0.0, "restart_s": 60.0, "checkpoint_seed": None}

# --- the model ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("gpus", "pods"), [
    (2, (2, 1)), (3, (3, 1)), (4, (2, 2)), (8, (2, 4)), (12, (2, 6)), (16, (2, 8)), (24, (3, 8)), (32, (4, 8)),
    (64, (8, 8)), (128, (16, 8)),
])
def test_an_elastic_job_is_the_fewest_equal_pods_of_at_most_a_node(gpus, pods):
    count, per_pod = elastic_pods(gpus, 8)
    assert (count, per_pod) == pods and count * per_pod == gpus


def test_one_gpu_or_no_node_makes_no_elastic_job():
    assert elastic_pods(1, 8) is None
    assert elastic_pods(16, 0) is None
    assert elastic_pods(6, 4) == (2, 3)  # 3 GPUs a pod fit a 4-GPU node


@pytest.mark.parametrize(("count", "minimum"), [(1, 1), (2, 1), (3, 2), (4, 2), (8, 4), (16, 8)])
def test_the_minimum_is_half_the_pods_rounded_up(count, minimum):
    assert min_pods(count) == minimum


def test_which_jobs_are_elastic():
    names = [f"p{i:05d}" for i in range(4000)]
    chosen = [n for n in names if is_elastic(n, 8, "acceptable", 0.5)]
    assert 0.45 < len(chosen) / len(names) < 0.55  # about the share
    assert chosen == [n for n in names if is_elastic(n, 8, "only", 0.5)]  # seeded by the name alone
    assert set(chosen) <= {n for n in names if is_elastic(n, 16, "acceptable", 0.8)}  # a larger share keeps them
    assert not any(is_elastic(n, 1, "acceptable", 1.0) for n in names)  # one GPU: no pods to shed
    assert not any(is_elastic(n, 8, "off", 1.0) for n in names)  # §2c: an elastic job must be able to borrow
    assert not any(is_elastic(n, 8, "acceptable", 0.0) for n in names)
    assert all(is_elastic(n, 8, "acceptable", 1.0) for n in names)
    shape = shape_of("p00001", 32, "acceptable", 1.0, 8)
    assert (shape.count, shape.min_count, shape.pod_gpus, shape.base_gpus) == (4, 2, 8, 16)


def test_throughput_grows_as_pods_to_the_alpha():
    assert throughput(4, 4, 0.8) == 1.0
    assert throughput(2, 4, 0.8) == pytest.approx(0.5 ** 0.8)  # 57 % of the work rate with half the pods
    assert throughput(1, 4, 0.8) == pytest.approx(0.25 ** 0.8)
    assert throughput(3, 4, 1.0) == 0.75  # alpha 1: linear
    for wrong in (0, 5):
        with pytest.raises(ValueError):
            throughput(wrong, 4, 0.8)


def test_a_run_at_half_rate_takes_twice_the_wall_time_for_its_work_but_not_for_its_saves():
    r = Run(start=0.0, gpus=8, base=0.0, work=3000.0, restart=0.0, phase=600.0, interval=600.0, cost=30.0, rate=0.5)
    # Saves at work 600, 1200, 1800 and 2400, 30 s each; the work takes 3000 / 0.5 = 6000 s.
    assert r.finish_at() == 6120.0
    assert r.progress(1215.0) == (600.0, 15.0, 0.0)  # the first save (at wall 1200) half done
    assert r.progress(1230.0) == (600.0, 30.0, 600.0)
    assert r.last_save_at(1300.0) == 1230.0
    # Stopped at 1300: 600 of work kept (1200 s), 35 redone (70 s), one save (30 s): 8 GPUs x 1300 s held.
    split = RunRecord(run=r, end=1300.0, stop=1300.0, kept=600.0).split(-math.inf, math.inf)
    assert split == {"useful": 9600.0, "redone": 560.0, "checkpoint": 240.0, "restart": 0.0, "grace": 0.0}


# --- replays ------------------------------------------------------------------------------------------

# Two 8-GPU nodes; teams a and b are guaranteed one each. e1 (team a, 16 GPUs, 3000 s of work) and, at
# 1000, b1 (team b, one node for 1000 s, idle off: an owner's job that only wants its guarantee).
TWO_TEAMS = cluster(2, a=8, b=8)
SHRINK_JOBS = [job("e1", "a", 0, 3000, gpus=16), replace(job("b1", "b", 1000, 1000), idle="off")]


def test_a_shrink_keeps_the_borrower_running_where_a_plain_job_is_preempted_whole():
    """With alpha 1 (half the pods, half the rate) every time is worked out by hand."""
    elastic = replay(SHRINK_JOBS, TWO_TEAMS, ReplayConfig(policy="idle", elastic_share=1.0, elastic_alpha=1.0, **COSTS))
    plain = replay(SHRINK_JOBS, TWO_TEAMS, ReplayConfig(policy="idle", **COSTS))
    e1, b1 = elastic.jobs
    # Plain: e1 borrows both nodes at 0 (16 GPUs do not fit team a's 8); b1's arrival at 1000 preempts it
    # whole; it has saved work 600, exits at 1030, and waits for b1's end (2030) to run again:
    # 2030 + 60 restart + 2400 of work = 4490.
    assert (plain.preemptions, plain.shrinks, plain.growths) == (1, 0, 0)
    assert plain.jobs[0].end_s == 4490.0 and plain.jobs[0].queued_s == 1000.0
    # Elastic (2 pods of 8, minimum 1): its base is admitted In Quota at 0 (rate 0.5); at 300 (the growth
    # interval) it grows onto b's idle node, restarting from its checkpoint (none yet: 150 of work redone);
    # b1's arrival at 1000 takes the extra pod only (work 640 done since 360: 600 saved); e1 goes on on its
    # base from 1000 (restart to 1060, rate 0.5), b1 starts at 1030 when the pod has exited, ends at 2030;
    # e1 grows back then (485 of work since 1060, no save: back to 600), and runs 60 + 2400 more: 4490.
    assert (elastic.preemptions, elastic.shrinks, elastic.growths, elastic.pods_shrunk, elastic.pods_grown) == (
        0, 1, 2, 1, 2)
    assert (e1.first_start_s, e1.first_in_quota, e1.end_s, e1.queued_s, e1.preemptions) == (0, True, 4490.0, 0.0, 0)
    assert (b1.first_start_s, b1.end_s) == (1030.0, 2030.0)
    assert elastic.allocation == [(0, 8), (300.0, 16), (1030.0, 16), (2030.0, 16), (4490.0, 0)]
    # What the resizes cost, in GPU-seconds: redone 8 x 300 (the first growth), 16 x 40 (the shrink),
    # 8 x 970 (the second growth); restarts 16 x 60, 8 x 60, 16 x 60; the shrunk pod's grace 8 x 30.
    assert (e1.redone_gpu_s, e1.restart_gpu_s, e1.grace_gpu_s) == (10800.0, 2400.0, 240.0)
    assert e1.resize_lost_gpu_s == 13440.0 and e1.useful_gpu_s == 16 * 3000
    # Of it the growths': 8 x 300 + 16 x 60 (the first), 8 x 970 + 16 x 60 (the second); the shrink's:
    # 16 x 40 redone, 8 x 30 grace, 8 x 60 restart.
    assert e1.growth_lost_gpu_s == 12080.0
    f = figures(elastic)
    assert (f["gpu_hours_lost"], f["gpu_hours_resize_lost"]) == (0.0, round(13440 / 3600, 3))
    assert (f["elastic_jobs"], f["shrinks"], f["growths"]) == (1, 1, 2)


def test_a_smaller_run_does_its_work_at_pods_to_the_alpha():
    # One 8-GPU node: e1 (16 GPUs: 2 pods of 8) runs its base alone and never grows; 1000 s of work at
    # 0.5 ** 0.8 of the full rate. A plain 16-GPU job could never run here and is refused.
    on = cluster(1, a=8)
    jobs = [job("e1", "a", 0, 1000, gpus=16)]
    result = replay(jobs, on, ReplayConfig(policy="idle", elastic_share=1.0, **COSTS))
    assert result.jobs[0].end_s == pytest.approx(1000 / 0.5 ** 0.8)
    assert result.growths == 0 and result.jobs[0].useful_gpu_s == pytest.approx(8 * 1000 / 0.5 ** 0.8)
    assert replay(jobs, on, ReplayConfig(policy="idle", **COSTS)).jobs[0].rejected


def test_an_elastic_job_grows_when_its_interval_has_passed_without_another_event():
    # e1's base starts at 0 on an empty two-node cluster; nothing else happens, yet it grows at 300 (its
    # growth interval), as the live loop's periodic cycle would find it.
    result = replay([job("e1", "a", 0, 3000, gpus=16)], TWO_TEAMS,
                    ReplayConfig(policy="idle", elastic_share=1.0, **COSTS))
    assert result.allocation[:2] == [(0, 8), (300.0, 16)] and result.growths == 1


@pytest.mark.parametrize(("seed", "cycle_s", "engine_settings"), [
    (1, 10.0, {}), (2, 0.0, {}), (3, 30.0, {"safe_point": True}), (4, 10.0, {"min_runtime_s": 600.0}),
    (5, 0.0, {"starvation_s": 900.0}), (4, 10.0, {"preempt_within": True}), (5, 10.0, {"idle_share": "fair"}),
])
def test_pruning_and_skipping_change_no_decision_with_elastic_jobs(seed, cycle_s, engine_settings):
    """The fast path gives exactly what the engine decides when it sees every pending job at every cycle, and
    the replay's GPU bookkeeping ends balanced (held, being released, borrowed, counted In Quota)."""
    on = cluster(4, a=16, b=8, c=8)
    jobs = random_trace(seed)
    config = ReplayConfig(policy="idle", cycle_s=cycle_s, elastic_share=1.0, **engine_settings)
    fast_replay = _Replay(jobs, on, config, partial(run_cycle, estimates=0), None)
    fast = fast_replay.run()
    exact = replay(jobs, on, replace(config, prune=False, skip_unchanged=False))
    assert fast.jobs == exact.jobs
    assert fast.allocation == exact.allocation
    assert (fast.shrinks, fast.growths, fast.cycles) == (exact.shrinks, exact.growths, exact.cycles)
    assert fast.shrinks > 0 and fast.growths > 0  # the traces do exercise both
    ledger = fast_replay.ledger
    assert not any(v for table in (ledger.held, ledger.releasing, ledger.borrowed) for v in table.values())
    assert not any(v for counted in ledger.inq.values() for v in counted.values())
    assert fast_replay.allocated == 0 and not fast_replay.resizes.shrinking


def test_elastic_jobs_change_the_replay_and_every_gpu_second_is_accounted():
    on = cluster(4, a=16, b=8, c=8)
    jobs = random_trace(6)
    plain = replay(jobs, on, ReplayConfig(policy="idle"))
    elastic = replay(jobs, on, ReplayConfig(policy="idle", elastic_share=1.0))
    assert plain.jobs != elastic.jobs
    f = figures(elastic)
    parts = sum(f["gpu_hours"][k] for k in ("useful", "redone", "checkpoint", "restart", "grace"))
    assert parts == pytest.approx(f["gpu_hours"]["held"], abs=0.01)
    held_by_runs = sum(r.run.gpus * (r.end - r.run.start) for r in elastic.runs)
    assert f["gpu_hours"]["held"] == pytest.approx(held_by_runs / 3600, abs=0.001)
    assert all(j.end_s is not None for j in elastic.jobs)  # every job finishes


# --- elastic off: nothing changes -----------------------------------------------------------------------


def test_elastic_off_or_without_an_elastic_job_is_the_plain_replay():
    on = cluster(4, a=16, b=8, c=8)
    jobs = random_trace(5)
    plain = replay(jobs, on, ReplayConfig(policy="idle"))
    for config in (ReplayConfig(policy="idle", elastic_share=0.0, elastic_alpha=0.3),
                   ReplayConfig(policy="idle", elastic_share=1.0)):
        trace = jobs if config.elastic_share == 0 else [replace(j, gpus=1) for j in jobs]
        base = plain if config.elastic_share == 0 else replay(trace, on, ReplayConfig(policy="idle"))
        other = replay(trace, on, config)
        assert other.jobs == base.jobs and other.allocation == base.allocation and other.runs == base.runs
        assert (other.shrinks, other.growths) == (0, 0)


def test_a_column_with_elastic_jobs_leaves_the_others_alone(tmp_path):
    """`--policy idle,idle+elastic` gives the `idle` column exactly as `--policy idle` alone, and the line that
    compares them."""
    csv = tmp_path / "jobs.csv"
    csv.write_text("name,quota,submit_s,duration_s,gpus,gpu_type,priority,idle\n"
                   "e1,a,0,3000,16,,,\nb1,b,1000,1000,8,,,off\n")
    yaml = tmp_path / "cluster.yaml"
    yaml.write_text("nodes:\n  - {name: n, gpu_type: A100, gpus: 8, count: 2}\nquotas:\n"
                    "  - {name: root, min: {gpus: {A100: 16}}}\n  - {name: a, parent: root, min: {gpus: {A100: 8}}}\n"
                    "  - {name: b, parent: root, min: {gpus: {A100: 8}}}\n")
    lines: list[str] = []

    def run(policy: str) -> dict:
        parser = argparse.ArgumentParser()
        cli.add_arguments(parser)
        options = vars(parser.parse_args(["--trace", str(csv), "--cluster", str(yaml), "--policy", policy,
                                          "--report", str(tmp_path / "r.html"), "--quiet"]))
        return cli.run(options, lines.append, lambda _: None)

    both = run("idle,idle+elastic=1+elastic-alpha=1")
    alone = run("idle")
    drop = ("wall_s", "engine_s")
    assert {k: v for k, v in both["policies"]["idle"].items() if k not in drop} == {
        k: v for k, v in alone["policies"]["idle"].items() if k not in drop}
    compared = both["elastic_vs_idle"]["idle+elastic=1+elastic-alpha=1"]
    assert (compared["preemptions"], compared["preemptions_avoided"]) == ([1, 0], 1)
    assert (compared["shrinks"], compared["growths"], compared["owners_p95_not_worse"]) == (1, 2, True)
    assert any(line.startswith("elastic [idle+elastic=1+elastic-alpha=1] vs [idle]: ") and "1 avoided" in line
               for line in lines)
    assert alone["elastic_vs_idle"] == {}


def test_elastic_options_and_modifiers():
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    options = vars(parser.parse_args(["--trace", "philly"]))
    assert cli.replay_config(options, "idle", "idle").elastic_share == 0.0  # off by default
    on = cli.replay_config(cli.variant_options(options, "idle+elastic"), "idle", "x")
    assert (on.elastic_share, on.elastic_alpha) == (0.5, 0.8)
    tuned = cli.replay_config(cli.variant_options(options, "idle+elastic=0.25+elastic-alpha=0.9"), "idle", "x")
    assert (tuned.elastic_share, tuned.elastic_alpha) == (0.25, 0.9)
    flagged = vars(parser.parse_args(["--trace", "philly", "--elastic", "--elastic-share", "1", "--elastic-alpha", "1"]))
    assert cli.replay_config(flagged, "idle", "x").elastic_share == 1.0
    for bad in ("idle+elastic=2", "idle+elastic-alpha=0", "idle+elastic=x", "strict+elastic", "pool+elastic"):
        with pytest.raises(cli.SimulationError):
            cli.policy_columns(options | {"policy": bad})
    with pytest.raises(SystemExit):
        parser.parse_args(["--elastic-alpha", "1.5"])


def test_the_comparison_needs_an_idle_column():
    assert elastic_comparison({"idle+elastic": {"elastic_share": 0.5}}) == {}
