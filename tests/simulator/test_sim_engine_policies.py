"""The simulator's DESIGN §2b options: the engine gets the cycle's time and the pools' policies, and
(`safe_point`) each running borrower's last simulated checkpoint; policies off change nothing."""

from __future__ import annotations

import pytest

from scheduler.simulator.metrics import figures
from scheduler.simulator.replay import ReplayConfig, replay
from scheduler.simulator.work import Run
from tests.simulator.test_sim_replay import FREE, cluster, job, random_trace


def test_last_save_is_when_the_last_completed_checkpoint_ended():
    r = Run(start=100.0, gpus=1, base=0.0, work=2000.0, restart=10.0, phase=600.0, interval=600.0, cost=30.0)
    # Work starts at 110; saves end at 110 + 600 + 30 = 740, then 740 + 630 = 1370.
    assert r.last_save_at(700) is None
    assert r.last_save_at(740) == 740
    assert r.last_save_at(1369) == 740
    assert r.last_save_at(1400) == 1370
    resumed = Run(start=0.0, gpus=1, base=600.0, work=2000.0, restart=0.0, phase=600.0, interval=600.0, cost=30.0)
    assert resumed.last_save_at(500) is None  # its base was saved by an earlier run
    assert resumed.last_save_at(630) == 630  # 600 of work to the checkpoint at 1200, then the save


def test_defaults_change_nothing():
    on = cluster(4, a=16, b=8, c=8)
    jobs = random_trace(5)
    plain = replay(jobs, on, ReplayConfig(policy="idle"))
    explicit = replay(jobs, on, ReplayConfig(policy="idle", idle_share="fifo", min_runtime_s=0.0, starvation_s=0.0))
    assert plain.jobs == explicit.jobs and plain.allocation == explicit.allocation


def test_min_runtime_protects_a_young_borrower():
    # Two nodes; a2 borrows b's node at 0; b1 arrives at 1000. With a 1 h minimum runtime a2 is not
    # reclaimed before 3600 (the next cycle after that: a1's end at 3600), so b1 waits that long.
    on = cluster(2, a=8, b=8)
    jobs = [job("a1", "a", 0, 3600), job("a2", "a", 0, 7200), job("b1", "b", 1000, 1000)]
    _, plain = _run(jobs, on)
    _, protected = _run(jobs, on, min_runtime_s=3600.0)
    assert plain["b1"].first_start_s == 1030
    assert protected["b1"].first_start_s >= 3600


def test_safe_point_prefers_the_borrower_that_just_checkpointed():
    # a1 holds team a's node; a2 (from 0) and a3 (from 100) borrow the other two. Checkpoints every
    # 600 s of work, 30 s each, the first one interval in: a2's first save ends at 630, a3's at 730.
    # b1 arrives at 700: by start a3 (100) goes; by safe point a2 (630, after a3's start) goes.
    on = cluster(3, a=8, b=8)
    jobs = [job("a1", "a", 0, 9000), job("a2", "a", 0, 9000), job("a3", "a", 100, 9000), job("b1", "b", 700, 100)]
    by_start, _ = _run(jobs, on, checkpoint_cost_s=30.0)
    by_safe, _ = _run(jobs, on, checkpoint_cost_s=30.0, safe_point=True)
    assert by_start == ["a3"]
    assert by_safe == ["a2"]


@pytest.mark.parametrize("idle_share", ["fifo", "fair"])
def test_policies_keep_every_job_accounted(idle_share):
    on = cluster(4, a=16, b=8, c=8)
    result = replay(random_trace(3), on, ReplayConfig(policy="idle", idle_share=idle_share, min_runtime_s=300.0,
                                                      starvation_s=1800.0, safe_point=True))
    assert all(j.end_s is not None or j.censored or j.rejected for j in result.jobs)


def _run(jobs, on, **config):
    result = replay(jobs, on, ReplayConfig(policy="idle", **(FREE | config)))
    by_name = {j.name: j for j in result.jobs}
    return sorted(j.name for j in result.jobs if j.preemptions), by_name


def test_cli_options_reach_the_replay():
    import argparse

    from scheduler.simulator.cli import add_arguments, replay_config

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    options = vars(parser.parse_args(["--trace", "philly", "--idle-share", "fair", "--min-runtime", "60",
                                      "--starvation", "600", "--safe-point"]))
    config = replay_config(options, "idle", "idle")
    assert (config.idle_share, config.min_runtime_s, config.starvation_s, config.safe_point) == ("fair", 60.0, 600.0,
                                                                                                True)
    plain = replay_config(vars(parser.parse_args(["--trace", "philly"])), "idle", "idle")
    assert (plain.idle_share, plain.min_runtime_s, plain.starvation_s, plain.safe_point) == ("fifo", 0.0, 0.0, False)


def test_preempt_within_lets_a_higher_priority_job_take_its_quota_back():
    # One 8-GPU node, team a guaranteed all of it. a1 (priority 1) runs In Quota from 0 for an hour;
    # a2 (priority 2) arrives at 100. Without preempt_within a2 waits for a1's end at 3600. With it,
    # a1 is demoted (a2 then fits a's guarantee), reclaimed as a borrower, and exits at 130, when a2
    # starts In Quota; a1 had saved nothing (first checkpoint at 600), so it redoes its 100 s.
    on = cluster(1, a=8)
    jobs = [job("a1", "a", 0, 3600, priority=1), job("a2", "a", 100, 1000, priority=2)]
    plain = {j.name: j for j in replay(jobs, on, ReplayConfig(policy="strict", **FREE)).jobs}
    within = replay(jobs, on, ReplayConfig(policy="strict", preempt_within=True, **FREE))
    by_name = {j.name: j for j in within.jobs}
    assert plain["a2"].first_start_s == 3600 and plain["a1"].preemptions == 0
    assert (by_name["a2"].first_start_s, by_name["a2"].first_in_quota) == (130, True)
    assert by_name["a1"].preemptions == 1 and by_name["a1"].redone_gpu_s == 8 * 100
    # a1 runs again when a2 ends (1130) with its whole hour to do.
    assert by_name["a1"].end_s == 1130 + 3600
    f = figures(within)
    # a1 was demoted and reclaimed in one cycle: an In Quota victim, no demotion left standing. a2
    # (priority 2) waited 30 s, a1 (priority 1) 1000 s after its exit at 130.
    assert (f["demotions"], f["preemptions"], f["in_quota_preemptions"]) == (0, 1, 1)
    assert (f["wait_by_priority_s"]["2"]["max"], f["wait_by_priority_s"]["1"]["max"]) == (30.0, 1000.0)
    assert figures(replay(jobs, on, ReplayConfig(policy="strict", **FREE)))["demotions"] == 0


def test_a_demoted_job_is_reclaimed_like_a_borrower_and_counted_so():
    # Two nodes, a and b guaranteed one each. a1 (priority 1) runs In Quota; a2 (priority 2) at 100
    # demotes it and runs In Quota on b's free node; at 1000 b1 reclaims a1, the demoted borrower.
    # Without preempt_within a2 borrowed b's node and would have been the victim.
    on = cluster(2, a=8, b=8)
    jobs = [job("a1", "a", 0, 3600, priority=1), job("a2", "a", 100, 9000, priority=2), job("b1", "b", 1000, 100)]
    _, plain = _run(jobs, on)
    victims, within = _run(jobs, on, preempt_within=True)
    assert plain["a2"].preemptions == 1 and plain["a1"].preemptions == 0
    assert victims == ["a1"] and within["a2"].first_in_quota
    assert within["b1"].first_start_s == 1030
    result = replay(jobs, on, ReplayConfig(policy="idle", preempt_within=True, **FREE))
    assert (result.demotions, result.in_quota_preemptions, result.preemptions) == (1, 0, 1)


def test_policy_modifiers_override_options_for_one_column():
    import argparse

    from scheduler.simulator.cli import SimulationError, add_arguments, variant_options

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    options = vars(parser.parse_args(["--trace", "philly", "--starvation", "600"]))
    changed = variant_options(options, "idle+fair+starvation=12h+safe-point+preempt-within+min-runtime=30m")
    assert (changed["idle_share"], changed["starvation"], changed["safe_point"]) == ("fair", 43200.0, True)
    assert (changed["preempt_within"], changed["min_runtime"]) == (True, 1800.0)
    assert variant_options(options, "idle")["starvation"] == 600.0  # no modifier: the command's options
    for bad in ("idle+fast", "idle+starvation", "idle+fair=1", "idle+starvation=2017-10-01"):
        with pytest.raises(SimulationError):
            variant_options(options, bad)


def test_high_priority_share_is_seeded_by_name():
    from scheduler.simulator.traces import with_high_priority

    jobs = [job(f"j{i}", "a", i, 100) for i in range(2000)]
    marked = with_high_priority(jobs, 0.1)
    high = {j.name for j in marked if j.priority == 2}
    assert 150 < len(high) < 250  # about 10 %
    assert {j.name for j in with_high_priority(jobs[500:], 0.1) if j.priority == 2} == {
        name for name in high if int(name[1:]) >= 500}  # a job keeps its draw in any subset
    assert all(j.priority == 1 for j in with_high_priority(jobs, 0.0))


def test_starvation_guard_does_not_reach_a_gang_starved_by_its_own_quota():
    # DESIGN §2b calls a job starving only when capacity is its only obstacle; an `off` job must fit
    # in quota first. Team a (16 GPUs on two nodes, strict) gets a 1-GPU job every 50 s for 20,000 s,
    # each running 1000 s, and one 16-GPU job at 10 s. Each GPU a small job frees is a single GPU of
    # quota headroom, which the next small job takes (the gang never fits in quota), so the gang waits
    # for the stream to end, with or without a guard: the guard never calls it starving.
    on = cluster(2, a=16)
    small = [job(f"s{k:03d}", "a", 50.0 * k, 1000, gpus=1) for k in range(400)]
    jobs = [*small, job("big", "a", 10, 1000, gpus=16)]
    plain = {j.name: j for j in replay(jobs, on, ReplayConfig(policy="strict", **FREE)).jobs}
    guarded = {j.name: j for j in replay(jobs, on, ReplayConfig(policy="strict", starvation_s=600.0, **FREE)).jobs}
    assert plain["big"].first_start_s == guarded["big"].first_start_s
    assert guarded["big"].first_start_s >= 20000


def test_the_starvation_hold_reaches_the_gang_its_own_quota_starves():
    # The stream of the test above with the hold on: once the gang has waited 600 s it holds team a's
    # freed guarantee, the small jobs behind it stop taking it, and the gang starts as soon as the
    # small jobs already running have ended (each runs 1000 s) — not after the 20,000 s stream.
    on = cluster(2, a=16)
    small = [job(f"s{k:03d}", "a", 50.0 * k, 1000, gpus=1) for k in range(400)]
    jobs = [*small, job("big", "a", 10, 1000, gpus=16)]
    held = {j.name: j for j in replay(jobs, on, ReplayConfig(policy="strict", starvation_s=600.0,
                                                            starvation_hold=True, **FREE)).jobs}
    assert 610 <= held["big"].first_start_s <= 610 + 1000 + 60
    assert all(held[s.name].first_start_s >= held["big"].first_start_s for s in small if s.submit_s > 700)
    with pytest.raises(ValueError, match="starvation time"):
        ReplayConfig(policy="strict", starvation_hold=True)


def test_the_hold_modifier_sets_the_hold_for_one_column():
    import argparse

    from scheduler.simulator.cli import add_arguments, variant_options

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    options = vars(parser.parse_args(["--trace", "philly"]))
    assert variant_options(options, "idle+starvation=1d+hold")["starvation_hold"] is True
    assert variant_options(options, "idle+starvation=1d")["starvation_hold"] is False


def test_a_run_begun_after_starving_is_not_taken_back_at_once():
    # Team a's node runs a1 for a day; a2 (team a, 8 GPUs) can only borrow team b's node, busy with
    # b0 until 5000. By then a2 has waited past the 3600 s guard, and borrows b's node. b1 (team b)
    # arrives at 6000: without protection it takes b's node back at once (a2, the freshest
    # borrower, is the first victim); with a starved minimum runtime longer than a2's run, a2
    # finishes at 25,000 and b1 starts then.
    on = cluster(2, a=8, b=8)
    jobs = [job("a1", "a", 0, 86400), job("b0", "b", 0, 5000), job("a2", "a", 0, 20000), job("b1", "b", 6000, 100)]
    _, guard = _run(jobs, on, starvation_s=3600.0)
    _, protected = _run(jobs, on, starvation_s=3600.0, starved_min_runtime_s=30000.0)
    assert guard["a2"].preemptions >= 1 and guard["b1"].first_start_s <= 6000 + 60
    assert protected["a2"].preemptions == 0 and protected["a2"].end_s == pytest.approx(25000, abs=60)
    assert protected["b1"].first_start_s == pytest.approx(25000, abs=60)
    with pytest.raises(ValueError, match="starvation time"):
        ReplayConfig(policy="idle", starved_min_runtime_s=600.0)


def test_the_starved_runtime_modifier_needs_a_guard_and_says_so(capsys):
    from scheduler.simulator.cli import main

    assert main(["--trace", "philly", "--limit", "10", "--quiet", "--policy", "idle+starved-min-runtime=1h"]) == 2
    assert "idle+starved-min-runtime=1h: the starved minimum runtime needs a starvation time" in capsys.readouterr().err
