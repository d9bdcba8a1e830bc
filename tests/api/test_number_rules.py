"""Every number rule over every numeric field of a submission, through the API and the console's form,
and every text field refusing what is no text (issue 25).

The rule (scheduler/validation.py `number_problem`): a number is a JSON number or its ASCII text
(`"12"`, `"1.5"`, `"2e3"`); never a boolean (`true` is an int in Python), never another script's digits
(`int("١")` and `float("１")` are 1), never Python's digit separators (`int("1_0")` is 10). Each
refusal is a 400 naming the field and saying what is accepted; nothing is created.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from scheduler import validation as v
from scheduler.models import Job
from tests.api.v1_helpers import submission
from tests.console.test_console_job_form import URL, counts, form_data
from tests.factories import World

pytestmark = pytest.mark.django_db

# (field as the API names it, path into the body, a good value, whole numbers only)
API_NUMBER_FIELDS = [
    ("priority", ("priority",), 3, True),
    ("max_restarts", ("max_restarts",), 2, True),
    ("max_running_minutes", ("max_running_minutes",), 60, True),
    ("grace_seconds", ("grace_seconds",), 30, False),
    ("roles[0].pod_count", ("roles", 0, "pod_count"), 1, True),
    ("roles[0].gpus", ("roles", 0, "gpus"), 1, True),
    ("roles[0].cpu", ("roles", 0, "cpu"), 2, False),
    ("roles[0].memory_gib", ("roles", 0, "memory_gib"), 8, False),
    ("roles[0].shared_memory_gib", ("roles", 0, "shared_memory_gib"), 1, False),
]
NOT_NUMBERS = [
    "١",  # ARABIC-INDIC DIGIT ONE: int() and float() read it as 1
    "１",  # FULLWIDTH DIGIT ONE
    "²",  # SUPERSCRIPT TWO: str.isdigit() is true
    "1_0",  # Python's digit separator: int("1_0") is 10
    True,  # bool is an int subclass: stored as 1 before
    False,
    "true",
    "0x10",
    "1\x00",
    "one",
    [1],
    {"value": 1},
]
NOT_WHOLE = ["1.5", 1.5, "1e1"]
FIELD_TEXT = {True: "whole number", False: "number"}


def with_value(body: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    body = copy.deepcopy(body)
    target: Any = body
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return body


def post(client: Client, body: Any) -> Any:
    return client.post("/api/v1/jobs/", json.dumps(body), content_type="application/json")


def small_submission() -> dict[str, Any]:
    return submission(roles=[{"name": "worker", "pod_count": 1, "gpus": 1, "cpu": 2, "memory_gib": 8}])


@pytest.mark.parametrize(("field", "path", "good", "whole"), API_NUMBER_FIELDS, ids=[f[0] for f in API_NUMBER_FIELDS])
def test_api_number_fields_take_json_numbers_and_ascii_text_only(world: World, alice_client: Client, field: str,
                                                                 path: tuple[Any, ...], good: Any, whole: bool) -> None:
    refused = NOT_NUMBERS + (NOT_WHOLE if whole else [])
    for value in refused:
        response = post(alice_client, with_value(small_submission(), path, value))
        assert response.status_code == 400, (field, value, response.status_code, response.content[:300])
        body = response.json()
        assert field in body, (value, body)
        message = " ".join(body[field])
        assert FIELD_TEXT[whole] in message and "ASCII" in message, (value, message)
    assert Job.objects.count() == 0
    for index, value in enumerate([good, str(good), f" {good} "]):
        response = post(alice_client, with_value(small_submission(), path, value) | {"name": f"ok-{index}"})
        assert response.status_code == 201, (field, value, response.json())
        assert Job.objects.get(name=f"ok-{index}") is not None


API_TEXT_FIELDS = [
    ("name", ("name",)),
    ("command", ("command",)),
    ("workspace", ("workspace",)),
    ("quota", ("quota",)),
    ("image", ("image",)),
    ("data_mount", ("data_mount",)),
    ("code_mount", ("code_mount",)),
    ("checkpoint_dir", ("checkpoint_dir",)),
    ("job_type", ("job_type",)),
    ("idle_mode", ("idle_mode",)),
    ("resource_type", ("resource_type",)),
    ("roles[0].name", ("roles", 0, "name")),
    ("roles[0].gpu_type", ("roles", 0, "gpu_type")),
    ("environment.FOO", ("environment", "FOO")),
]


@pytest.mark.parametrize(("field", "path"), API_TEXT_FIELDS, ids=[f[0] for f in API_TEXT_FIELDS])
@pytest.mark.parametrize("value", [5, 3.5, True, ["a"], {"a": "b"}], ids=["int", "float", "bool", "list", "object"])
def test_api_text_fields_refuse_what_is_no_text(world: World, alice_client: Client, field: str, path: tuple[Any, ...],
                                                value: Any) -> None:
    body = small_submission() | {"environment": {"FOO": "bar"}}
    response = post(alice_client, with_value(body, path, value))
    assert response.status_code == 400, (field, value, response.status_code, response.content[:300])
    errors = response.json()
    assert field in errors, errors
    assert Job.objects.count() == 0


def test_an_id_as_a_json_number_still_names_workspace_and_quota_as_text(world: World, alice_client: Client) -> None:
    """`workspace` and `quota` are names or ids; an id is sent as text ("12"), as in the path of a URL."""
    body = small_submission() | {"workspace": str(world.vision.pk), "quota": str(world.team_vision.pk)}
    assert post(alice_client, body).status_code == 201


# ----------------------------------------------------------------------------------- the console

FORM_NUMBER_FIELDS = [
    ("priority", "priority", "job"),
    ("max_restarts", "max_restarts", "job"),
    ("max_running_minutes", "max_running_minutes", "job"),
    ("grace_seconds", "grace_seconds", "job"),
    ("roles-0-pod_count", "pod_count", "role"),
    ("roles-0-gpus", "gpus", "role"),
    ("roles-0-cpu", "cpu", "role"),
    ("roles-0-memory_gib", "memory_gib", "role"),
    ("roles-0-shared_memory_gib", "shared_memory_gib", "role"),
]
FORM_NOT_NUMBERS = ["١", "１", "²", "1_0", "0x10", "one", "1\x00"]


@pytest.mark.parametrize(("key", "field", "form"), FORM_NUMBER_FIELDS, ids=[f[0] for f in FORM_NUMBER_FIELDS])
@pytest.mark.parametrize("value", FORM_NOT_NUMBERS)
def test_form_number_fields_take_ascii_digits_only(world: World, alice_client: Client, key: str, field: str,
                                                   form: str, value: str) -> None:
    before = counts()
    response = alice_client.post(URL, form_data(world, **{key: value}))
    assert response.status_code == 400
    errors = response.context["form"].errors if form == "job" else response.context["formset"].forms[0].errors
    assert field in errors, (key, value, errors)
    assert counts() == before


# ------------------------------------------------------------------------------ the rules themselves

def test_whole_number_rule() -> None:
    for value in [3, "3", " 3 ", "+3", 3.0]:
        assert v.whole_number(value, "f", low=0, high=9) == 3
    for value in [*NOT_NUMBERS, *NOT_WHOLE, None, "", float("nan"), float("inf")]:
        with pytest.raises(ValidationError) as refused:
            v.whole_number(value, "f", low=0, high=9)
        assert "f" in refused.value.message_dict


def test_amount_and_grace_rules() -> None:
    assert v.amount("1.5", "cpu", high=v.MAX_CPU_PER_POD) == v.amount(1.5, "cpu", high=v.MAX_CPU_PER_POD)
    assert v.grace_seconds_value("2e1") == 20.0 and v.grace_seconds_value(None) is None
    for value in [*NOT_NUMBERS, "NaN", "Infinity", float("nan")]:
        with pytest.raises(ValidationError):
            v.amount(value, "cpu", high=v.MAX_CPU_PER_POD)
        with pytest.raises(ValidationError):
            v.grace_seconds_value(value)
