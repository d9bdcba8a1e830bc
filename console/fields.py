"""Form fields the console's forms share."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ValidationError


class AsciiNumberMixin:
    """Numbers typed with ASCII digits only: Python reads "١" as 1 and "²" as a digit."""

    def to_python(self, value: Any) -> Any:
        if isinstance(value, str) and not value.isascii():
            raise ValidationError(self.error_messages["invalid"], code="invalid")
        return super().to_python(value)


class AsciiIntegerField(AsciiNumberMixin, forms.IntegerField):
    pass


class AsciiDecimalField(AsciiNumberMixin, forms.DecimalField):
    pass
