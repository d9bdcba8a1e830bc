"""scheduler.api.v1.serializers.FieldsBuiltOnce (issue 25): DRF's deep copy of the declared fields is
made once per serializer class, not per instance, and each instance still owns its fields."""

from __future__ import annotations

from unittest import mock

import pytest
from django.test import Client
from rest_framework import fields as drf_fields

from scheduler.api.v1 import serializers as s
from scheduler.selectors import job_detail
from tests.api.v1_helpers import submission
from tests.factories import World

pytestmark = pytest.mark.django_db


def test_a_second_submission_deep_copies_only_fields_with_children(world: World, alice_client: Client) -> None:
    """Before: every plain field of the submission, its roles, the answered detail and its nested
    serializers was rebuilt (Field.__deepcopy__) on every request, about 80 of them."""
    assert alice_client.post("/api/v1/jobs/", submission(name="first"), content_type="application/json").status_code == 201
    real = drf_fields.Field.__deepcopy__
    with mock.patch.object(drf_fields.Field, "__deepcopy__", autospec=True, side_effect=real) as deepcopy:
        created = alice_client.post("/api/v1/jobs/", submission(name="second"), content_type="application/json")
    assert created.status_code == 201, created.content
    copied = {type(call.args[0]).__name__ for call in deepcopy.call_args_list}
    # DictField (environment), its child and the default child DictField.__init__ always copies; the
    # nested serializers' lists and their children
    assert copied <= {"DictField", "TextField", "CharField", "_UnvalidatedField", "ListSerializer",
                      "RoleInputSerializer",
                      "ProgressSerializer", "RoleSerializer", "PodSerializer", "EventSerializer",
                      "PreemptionSerializer"}, copied
    assert deepcopy.call_count <= 20, [type(call.args[0]).__name__ for call in deepcopy.call_args_list]


def test_each_instance_owns_its_fields(world: World, alice_client: Client) -> None:
    created = alice_client.post("/api/v1/jobs/", submission(), content_type="application/json")
    job = job_detail(user=world.alice, job_id=created.json()["id"])
    first, second = s.JobSubmitSerializer(data={}), s.JobSubmitSerializer(data={})
    assert first.fields["name"] is not second.fields["name"]
    assert first.fields["name"].parent is first and second.fields["name"].parent is second
    assert first.fields["roles"].child is not second.fields["roles"].child
    assert first.fields["roles"].child.root is first and second.fields["roles"].child.root is second
    assert first.fields["environment"].child.parent is first.fields["environment"]
    # a change to one instance's field stays there, as after DRF's deep copy
    first.fields["name"].required = False
    first.fields["name"].error_messages["required"] = "changed"
    first.fields["priority"].validators.append(lambda value: None)
    assert second.fields["name"].required is True
    assert second.fields["name"].error_messages["required"] != "changed"
    assert len(second.fields["priority"].validators) == len(first.fields["priority"].validators) - 1
    third = s.JobSubmitSerializer(data={})
    assert third.fields["name"].required is True and third.fields["name"].label == "Name"
    # the subclass keeps its own fields (JobDetailSerializer declares more than JobSerializer)
    assert "command" in s.JobDetailSerializer(job).data and "command" not in s.JobSerializer(job).data
    assert not second.is_valid() and set(second.errors) >= {"name", "workspace", "quota", "command", "roles"}
