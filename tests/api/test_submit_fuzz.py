"""Hypothesis over POST /api/v1/jobs/: whatever the body, the answer is 201 or 400 — never a 500."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.models import Job
from tests.factories import World

pytestmark = pytest.mark.django_db

NASTY_TEXT = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["", "\x00", "²", "١", "fzq-😀", "FOO\n", "worker", "team-vision", "vision", "1", "-1",
                     "1e400", "NaN", "Infinity", "a" * 300]),
)
NASTY_INT = st.one_of(
    st.integers(min_value=-(2**64), max_value=2**64),
    st.sampled_from([0, 1, 8, 2**31, 2**31 - 1, 2**63, -(2**63), 10**30]),
)
SCALAR = st.one_of(st.none(), st.booleans(), NASTY_INT, st.floats(allow_nan=False), NASTY_TEXT)
JSONISH = st.recursive(SCALAR, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NASTY_TEXT, inner,
                                                                                           max_size=3), max_leaves=8)


def field(valid: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(valid, valid, SCALAR, JSONISH)


ROLE = st.fixed_dictionaries(
    {},
    optional={
        "name": field(st.sampled_from(["worker", "master", "ps"])),
        "pod_count": field(st.integers(0, 4)),
        "gpu_type": field(st.sampled_from(["", "A100", "H800"])),
        "gpus": field(st.integers(0, 9)),
        "cpu": field(st.decimals(0, 200, places=3).map(str)),
        "memory_gib": field(st.integers(0, 1000)),
        "shared_memory_gib": field(st.integers(0, 100)),
    },
)
BODY = st.fixed_dictionaries(
    {
        "name": field(st.from_regex(r"[a-z][a-z0-9-]{0,10}[a-z0-9]", fullmatch=True)),
        "workspace": field(st.sampled_from(["vision", "language"])),
        "quota": field(st.sampled_from(["team-vision", "team-shared", "team-language"])),
        "command": field(st.just("python train.py")),
        "roles": field(st.lists(ROLE, min_size=0, max_size=3)),
    },
    optional={
        "job_type": field(st.sampled_from(["pytorch", "mpi"])),
        "environment": field(st.dictionaries(NASTY_TEXT, NASTY_TEXT, max_size=3)),
        "priority": field(st.integers(0, 10)),
        "idle_mode": field(st.sampled_from(["off", "acceptable", "only"])),
        "max_running_minutes": field(st.integers(0, 100)),
        "fault_tolerance": field(st.booleans()),
        "max_restarts": field(st.integers(-1, 5)),
        "checkpoint_dir": field(st.just("/ckpt")),
        "image": field(st.just("pytorch/pytorch")),
    },
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                    HealthCheck.too_slow])
@given(body=st.one_of(BODY, BODY, JSONISH))
def test_submit_never_answers_500(world: World, alice_client: Client, body: Any) -> None:
    before = Job.objects.count()
    response = alice_client.post("/api/v1/jobs/", json.dumps(body), content_type="application/json")
    assert response.status_code in (201, 400), (response.status_code, body, response.content[:500])
    created = Job.objects.count() - before
    assert created == (1 if response.status_code == 201 else 0)
    if response.status_code == 400:
        assert response.json(), body  # a refusal names what it refuses
