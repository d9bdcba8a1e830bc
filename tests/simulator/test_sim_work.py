"""Where a run's wall time goes: restart overhead, checkpoint saves at a per-job phase, redone work."""

from __future__ import annotations

import math

import pytest

from scheduler.engine.types import Node, Quota, gpu_key
from scheduler.simulator.metrics import figures
from scheduler.simulator.model import ReplayConfig
from scheduler.simulator.replay import replay
from scheduler.simulator.traces import Cluster, TraceJob
from scheduler.simulator.work import Run, RunRecord, WorkModel


def run(**fields) -> Run:
    defaults = {"start": 0.0, "gpus": 1, "base": 0.0, "work": 2000.0, "restart": 0.0, "phase": 600.0,
                "interval": 600.0, "cost": 30.0}
    return Run(**(defaults | fields))


def test_saves_pause_the_work_and_only_completed_saves_count():
    r = run()
    # Checkpoints at work 600, 1200, 1800 (all before the end at 2000): 3 saves of 30 s.
    assert r.saves_between(0, 2000) == 3
    assert r.finish_at() == 2090
    # Wall 0-600 work, 600-630 save, 630-1230 work, 1230-1260 save, 1260-1860 work, 1860-1890 save.
    assert r.progress(599) == (599, 0, 0)
    assert r.progress(615) == (600, 15, 0)  # saving: not yet a checkpoint
    assert r.progress(630) == (600, 30, 600)  # the save is complete at 630
    assert r.progress(1500) == (1440, 60, 1200)
    assert r.progress(2090) == (2000, 90, 1800)


def test_a_random_phase_moves_every_checkpoint():
    r = run(phase=250.0)
    # Checkpoints at 250, 850, 1450: wall 0-250 work, 250-280 save, 280-880 work, 880-910 save,
    # then 590 s of work by 1500: 250 + 600 + 590 = 1440 done, 850 saved.
    assert r.progress(1500) == (1440, 60, 850)
    assert r.finish_at() == 2090


def test_a_resumed_run_pays_its_restart_and_saves_no_checkpoint_twice():
    # Resumed from the checkpoint at 1200 with a 60 s restart: next checkpoint 1800, then the end.
    r = run(start=1630.0, base=1200.0, restart=60.0)
    assert r.saves_between(1200, 2000) == 1
    assert r.finish_at() == 1630 + 60 + 800 + 30
    assert r.progress(1650) == (0, 0, 1200)  # still restarting
    assert r.restart_time(1650) == 20 and r.restart_time(5000) == 60
    assert r.progress(2300) == (600, 10, 1200)  # work reached 1800 at 2290, saving since


def test_a_record_splits_held_time_exactly():
    # Preempted at 1500 (SIGTERM), pods gone at 1530, 1200 s of work kept.
    record = RunRecord(run=run(gpus=8), end=1530.0, stop=1500.0, kept=1200.0)
    split = record.split(-math.inf, math.inf)
    assert split == {"useful": 9600.0, "redone": 1920.0, "checkpoint": 480.0, "restart": 0.0, "grace": 240.0}
    assert sum(split.values()) == 8 * 1530
    # Inside [1000, 1520]: work 1000-1230 (230 s, kept), save 1230-1260, work 1260-1500 (240 s,
    # redone), grace 1500-1520.
    assert record.split(1000, 1520) == {
        "useful": 8 * 230.0, "redone": 8 * 240.0, "checkpoint": 8 * 30.0, "restart": 0.0, "grace": 8 * 20.0,
    }


def test_phases_are_seeded_per_job_and_within_one_interval():
    model = WorkModel(interval_s=600, seed=7)
    phases = [model.phase(f"j{i}") for i in range(200)]
    assert all(0 < p <= 600 for p in phases)
    assert phases == [WorkModel(interval_s=600, seed=7).phase(f"j{i}") for i in range(200)]
    assert phases != [WorkModel(interval_s=600, seed=8).phase(f"j{i}") for i in range(200)]
    assert len(set(phases)) == 200
    assert WorkModel(interval_s=600, seed=None).phase("j0") == 600
    with pytest.raises(ValueError):
        WorkModel(cost_s=-1)


def test_a_replay_charges_saves_restarts_redone_work_and_grace():
    # One node, guaranteed to team a; team x has none (idle only). Saves cost 30 s, a resumed run
    # restarts for 60 s, first checkpoint one interval (600 s) into the work.
    on = Cluster(
        nodes=(Node(name="n0", gpu_type="A100", gpus=8, cpu_m=0, memory_mib=0),),
        quotas=(Quota(name="root", parent=None, min={gpu_key("A100"): 8}),
                Quota(name="a", parent="root", min={gpu_key("A100"): 8})),
    )
    jobs = [TraceJob(name="x1", quota="x", submit_s=0, duration_s=2000, gpus=8),
            TraceJob(name="a1", quota="a", submit_s=1500, duration_s=100, gpus=8)]
    config = ReplayConfig(policy="idle", checkpoint_cost_s=30, restart_s=60, checkpoint_seed=None)
    result = replay(jobs, on, config)
    by_name = {j.name: j for j in result.jobs}
    x1, a1 = by_name["x1"], by_name["a1"]
    # x1: saves at 600-630 and 1230-1260; SIGTERM at 1500 with 1440 s done and 1200 saved: 240 s
    #   redone; pods gone at 1530. a1 runs 1530-1630 (no save: its first checkpoint would be at 600).
    # x1 again at 1630: 60 s restart, 600 s of work to 1800 (2290), save to 2320, 200 s: ends 2520.
    assert (x1.end_s, a1.first_start_s, a1.end_s) == (2520, 1530, 1630)
    assert (x1.useful_gpu_s, x1.redone_gpu_s, x1.checkpoint_gpu_s, x1.restart_gpu_s, x1.grace_gpu_s) == (
        16000, 1920, 720, 480, 240,
    )
    # Held: 8 x (1530 + 890) = 19,360 GPU-s, all accounted for.
    assert x1.held_gpu_s == 19360
    # Queued: x1 from its exit at 1530 to 1630; a1 from 1500 to 1530.
    assert (x1.queued_s, a1.queued_s) == (100, 30)
    f = figures(result)
    assert f["gpu_hours"] == {
        "useful": round(16800 / 3600, 3), "redone": round(1920 / 3600, 3), "checkpoint": 0.2,
        "restart": round(480 / 3600, 3), "grace": round(240 / 3600, 3), "held": 5.6,
    }
    # Lost to the preemption: redone + restart + grace = 2,640 of 20,160 GPU-s held.
    assert f["lost_share"] == round(2640 / 20160, 6)
    # In the arrival window [0, 1500] x1 held the node but kept only 1200 s of work: 9,600 / 12,000.
    assert (f["allocation_rate"], f["held_rate"]) == (0.8, 1.0)
