"""Write fields of /api/v1/ that read input strictly (issue 25): numbers by scheduler.validation's
rule (`parse_number`: a JSON number or ASCII text, never a boolean), text only from JSON strings.

DRF's own fields are lenient where a client bug should be seen: IntegerField and FloatField read
"١" as 1 (Python's int() and float() do), FloatField takes `true` as 1.0, CharField turns 5 into "5".
"""

from __future__ import annotations

import json
from typing import Any

from rest_framework import serializers

from scheduler import validation as v


class _StrictNumber:
    whole = True

    def to_internal_value(self, data: Any) -> Any:
        problem = v.number_problem(data, self.field_name, whole=self.whole)
        if problem:
            raise serializers.ValidationError(problem)
        return super().to_internal_value(data)


class StrictIntegerField(_StrictNumber, serializers.IntegerField):
    """A whole number: 3, 3.0 or "3"; not "١", "1_0", "1.5" or true."""


class StrictDecimalField(_StrictNumber, serializers.DecimalField):
    """A number: 2, 1.5, "1.5" or "2e3"; not "١", "inf" or true."""

    whole = False


class StrictFloatField(_StrictNumber, serializers.FloatField):
    """A number as StrictDecimalField reads it, answered as a float."""

    whole = False


class _TextOnly:
    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str):
            shown = json.dumps(data, default=str)[:40]
            raise serializers.ValidationError(f"{self.field_name or 'The value'} must be text (a JSON string), "
                                              f"got {shown}.")
        return super().to_internal_value(data)


class TextField(_TextOnly, serializers.CharField):
    """A JSON string; 5 is not "5"."""


class TextChoiceField(_TextOnly, serializers.ChoiceField):
    """One of the choices, as a JSON string."""
