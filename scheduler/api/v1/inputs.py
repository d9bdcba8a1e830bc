"""What the v1 views share to read a request and to answer a refusal: a service's ValidationError
becomes a 400 keyed by the same field names ("roles[0].gpus", "min_gpus", …), and query parameters
are checked by scheduler.validation's rules (a 400 naming the parameter)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request

from scheduler.validation import parse_id, query_text


def service_error(error: DjangoValidationError) -> ValidationError:
    """A service refusal as DRF's 400, keyed by field ("roles[0].gpus", "min_gpus", …)."""
    if hasattr(error, "error_dict"):
        return ValidationError(error.message_dict)
    return ValidationError({"non_field_errors": error.messages})


def flat_errors(errors: Any, prefix: str = "") -> dict[str, list[str]]:
    """DRF's nested serializer errors keyed the way the services key theirs: "roles[0].pod_count"."""
    if isinstance(errors, dict):
        flat: dict[str, list[str]] = {}
        for key, value in errors.items():
            if key == "non_field_errors" and prefix:
                name = prefix
            elif isinstance(key, int):  # a list serializer's item
                name = f"{prefix}[{key}]"
            else:
                name = f"{prefix}.{key}" if prefix else str(key)
            for field, messages in flat_errors(value, name).items():
                flat.setdefault(field, []).extend(messages)
        return flat
    if isinstance(errors, list) and any(isinstance(item, dict | list) for item in errors):
        flat = {}
        for index, item in enumerate(errors):
            for field, messages in flat_errors(item, f"{prefix}[{index}]").items():
                flat.setdefault(field, []).extend(messages)
        return flat
    messages = errors if isinstance(errors, list) else [errors]
    return {prefix or "non_field_errors": [str(message) for message in messages]} if messages else {}


def validated(serializer: serializers.Serializer) -> dict[str, Any]:
    """The serializer's data, or a 400 keyed by flat field names."""
    if not serializer.is_valid():
        raise ValidationError(flat_errors(serializer.errors))
    return dict(serializer.validated_data)


def int_param(request: Request, field: str) -> int | None:
    """A whole-number query parameter: ASCII digits within a 64-bit column, else a 400 naming it."""
    value = request.query_params.get(field)
    if value in (None, ""):
        return None
    number = parse_id(value)
    if number is None:
        raise ValidationError({field: [f"{field} must be a whole number in ASCII digits (0-9), got {value[:40]!r}."]})
    return number


def text_param(request: Request, field: str) -> str:
    """A text query parameter; a NUL byte or an absurd length is a 400 naming it."""
    try:
        return query_text(request.query_params.get(field, ""), field)
    except DjangoValidationError as error:
        raise service_error(error) from None


FLAG_VALUES = {"1": True, "0": False}


def flag_param(request: Request, field: str) -> bool:
    """An on/off query parameter (`mine=1`, `follow=1`): absent or empty is off; anything but 1 or 0 (the
    schema's enum) is a 400 naming it, since `mine=AAA` would otherwise quietly mean off."""
    value = request.query_params.get(field, "")
    if value == "":
        return False
    if value not in FLAG_VALUES:
        raise ValidationError({field: [f"{field} is 1 (on) or 0 (off), got {value[:40]!r}."]})
    return FLAG_VALUES[value]


def choice_param(request: Request, field: str, choices: Iterable[str]) -> str:
    """A query parameter that is one of `choices`, or empty; anything else is a 400 naming it and them."""
    value = text_param(request, field)
    allowed = list(choices)
    if value and value not in allowed:
        raise ValidationError({field: [f"{field} is one of {', '.join(allowed)}; got {value[:40]!r}."]})
    return value
