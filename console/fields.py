"""Form fields the console's forms share."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from scheduler import validation as v


class AsciiNumberMixin:
    """Numbers by scheduler.validation's rule (`parse_number`): ASCII digits only. Django's fields, as
    Python, read "١" and "１" as 1 and "1_0" as 10."""

    whole = True

    def to_python(self, value: Any) -> Any:
        if isinstance(value, str) and value.strip():
            if v.number_problem(value, "value", whole=self.whole):  # shown at its field: Django's words, and why
                accepted = "Enter a whole number. ASCII digits 0–9 only (e.g. 12)" if self.whole else \
                    "Enter a number. ASCII digits 0–9 and a dot only (e.g. 1.5)"
                raise ValidationError(f"{accepted}, got {value.strip()[:40]!r}.", code="invalid")
        return super().to_python(value)


class AsciiIntegerField(AsciiNumberMixin, forms.IntegerField):
    pass


class AsciiDecimalField(AsciiNumberMixin, forms.DecimalField):
    whole = False
