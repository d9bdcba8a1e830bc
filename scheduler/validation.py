"""Input rules shared by the services, the REST API's serializers and the console's forms.

Every integer a user can type is bounded twice: by what the model and its column can hold (a
pod count past 2³¹ never reaches the database, nor a loop that would build 2³¹ pods), and — for
per-pod resources — by the cluster (no pod larger than the largest schedulable node of its pool;
`role_limits_error`). Names follow one rule everywhere (lowercase ASCII letters, digits and
dashes), text never carries a NUL byte (PostgreSQL refuses them), and numbers are JSON numbers
or ASCII text, never booleans (`parse_number`: `"²".isdigit()` is true, `int("١")` is 1, `True` is an int).

A refusal is a `django.core.exceptions.ValidationError` keyed by the field, which the API turns
into a 400 and the console into a form error.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.core.exceptions import ValidationError

# ------------------------------------------------------------------------------------- bounds

MAX_ROLES = 8  # roles per job (the console's form offers the same number)
MAX_PODS_PER_JOB = 512  # all roles together; a role alone is bounded by this too
MAX_GPUS_PER_POD = 64  # before the cluster's own bound (the largest node)
MAX_CPU_PER_POD = Decimal(100_000)  # cores
MAX_MEMORY_GIB_PER_POD = Decimal(1_048_576)  # 1 PiB
MIN_PRIORITY, MAX_PRIORITY = 1, 9
MAX_RESTARTS = 100
MAX_RUNNING_MINUTES = 366 * 24 * 60  # a year
MAX_GRACE_SECONDS = 3600
MAX_POLICY_SECONDS = 30 * 24 * 3600  # a pool's min_runtime_s and starvation_s (DESIGN §2b): 30 days
# DESIGN §2c: how often a pool's elastic jobs may grow; a day bounds it (a longer wait is growth off in all but name)
DEFAULT_GROW_INTERVAL_S = 300
MAX_GROW_INTERVAL_S = 24 * 3600
MAX_COMMAND_CHARS = 16_384
MAX_ENV_VARS = 64
MAX_ENV_NAME_CHARS = 128
MAX_ENV_VALUE_CHARS = 4096
MAX_ENV_TOTAL_CHARS = 32_768
MAX_PATH_CHARS = 255  # image, mounts, checkpoint directory: the column's length
MAX_GPU_MODEL_CHARS = 32
MAX_QUOTA_GPUS = 1_000_000  # per GPU model, min or max of a quota
MAX_QUOTA_CPU = Decimal("9999999.999")  # the column (10 digits, 3 decimals)
MAX_QUOTA_MEMORY_GIB = Decimal("999999999.999")  # the column (12 digits, 3 decimals)
MAX_ID_DIGITS = 18  # every id fits a signed 64-bit column
MAX_QUERY_TEXT_CHARS = 100  # a name filter
MAX_JSON_DEPTH = 32  # request bodies (scheduler.api.parsers)

NAME_LENGTHS = {"job": 100, "role": 32, "quota": 64, "workspace": 64}

NAME_RE = re.compile(r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?")
ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
GPU_MODEL_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
ID_RE = re.compile(rf"[0-9]{{1,{MAX_ID_DIGITS}}}")


def refuse(field: str, message: str) -> ValidationError:
    return ValidationError({field: message})


# -------------------------------------------------------------------------------------- names


def name_rule(kind: str) -> str:
    return (
        f"A {kind} name is 1–{NAME_LENGTHS[kind]} lowercase letters (a–z), digits or dashes, "
        "starting and ending with a letter or digit."
    )


def name_problem(value: Any, kind: str) -> str | None:
    """Why `value` is not a valid name of a `kind` (job, role, quota, workspace); None when it is."""
    if not isinstance(value, str) or len(value) > NAME_LENGTHS[kind] or not NAME_RE.fullmatch(value):
        return name_rule(kind)
    return None


def check_name(value: Any, field: str, kind: str) -> str:
    problem = name_problem(value, kind)
    if problem:
        raise refuse(field, problem)
    return value


def gpu_model_problem(value: Any) -> str | None:
    if not isinstance(value, str) or len(value) > MAX_GPU_MODEL_CHARS or not GPU_MODEL_RE.fullmatch(value):
        return (
            f"A GPU model is 1–{MAX_GPU_MODEL_CHARS} ASCII letters, digits, dots, dashes or underscores "
            f"(e.g. A100), got {_shown(value)}."
        )
    return None


# --------------------------------------------------------------------------------------- text


def text_problem(value: Any, max_chars: int) -> str | None:
    if not isinstance(value, str):
        return f"Text is expected, got {_shown(value)}."
    if "\x00" in value:
        return "NUL characters are not allowed."
    if len(value) > max_chars:
        return f"At most {max_chars} characters (got {len(value)})."
    return None


def check_text(value: Any, field: str, max_chars: int) -> str:
    value = "" if value is None else value
    problem = text_problem(value, max_chars)
    if problem:
        raise refuse(field, problem)
    return value


def check_environment(environment: Any, field: str = "environment") -> dict[str, str]:
    """Variable names as a shell would accept them, values as text, both bounded in size and count."""
    if environment in (None, ""):
        return {}
    if not isinstance(environment, Mapping):
        raise refuse(field, "Environment variables are a mapping of names to values.")
    if len(environment) > MAX_ENV_VARS:
        raise refuse(field, f"At most {MAX_ENV_VARS} environment variables (got {len(environment)}).")
    cleaned: dict[str, str] = {}
    total = 0
    for key, value in environment.items():
        if not isinstance(key, str) or len(key) > MAX_ENV_NAME_CHARS or not ENV_NAME_RE.fullmatch(key):
            raise refuse(
                field,
                f"{_shown(key)} is not a valid environment variable name: ASCII letters, digits and "
                f"underscores, not starting with a digit, at most {MAX_ENV_NAME_CHARS} characters.",
            )
        if not isinstance(value, str):  # 8080 is not "8080": a client that sends numbers has a bug to see
            raise refuse(field, f"The value of {key} must be text (a JSON string), got {_shown(value)}.")
        text = value
        problem = text_problem(text, MAX_ENV_VALUE_CHARS)
        if problem:
            raise refuse(field, f"The value of {key}: {problem}")
        total += len(key) + len(text)
        cleaned[key] = text
    if total > MAX_ENV_TOTAL_CHARS:
        raise refuse(field, f"Environment variables add up to {total} characters; at most {MAX_ENV_TOTAL_CHARS}.")
    return cleaned


# ------------------------------------------------------------------------------------ numbers


WHOLE_TEXT_RE = re.compile(r"[+-]?[0-9]+")
NUMBER_TEXT_RE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
MAX_NUMBER_TEXT_CHARS = 40  # longer text is no number any bound here allows (and int() of 5,000 digits raises)


def number_rule(label: str, *, whole: bool, bounds: str = "") -> str:
    """What a number field accepts, for its error message; `bounds` e.g. " from 1 to 9"."""
    if whole:
        return (f"{label} must be a whole number{bounds}, written as a JSON number or in ASCII digits "
                '(e.g. 3 or "3"; not true or false)')
    return (f"{label} must be a number{bounds}, written as a JSON number or in ASCII digits "
            '(e.g. 2, "2" or "1.5"; not true or false)')


def parse_number(value: Any, field: str, *, whole: bool, label: str | None = None, bounds: str = "") -> int | Decimal:
    """`value` as a number, the one way every caller reads one: an int, a finite float or Decimal (whole if
    `whole`), or their text in ASCII (`"12"`, `"-3"`, and for decimals `"1.5"`, `"2e3"`). Never a bool (an int
    subclass), nor what Python's int() and float() accept besides: other scripts' digits ("١", "１"), digit
    separators ("1_0"), "nan" or "inf". An int when `whole`, else a Decimal."""
    label = label or field
    number: int | Decimal | None = None
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int):
        number = value if whole else Decimal(value)
    elif isinstance(value, float | Decimal):
        if math.isfinite(value) and (not whole or value == int(value)):
            number = int(value) if whole else Decimal(str(value))
    elif isinstance(value, str):
        text = value.strip()
        if len(text) <= MAX_NUMBER_TEXT_CHARS and (WHOLE_TEXT_RE if whole else NUMBER_TEXT_RE).fullmatch(text):
            number = int(text) if whole else Decimal(text)
    if number is None:
        raise refuse(field, f"{number_rule(label, whole=whole, bounds=bounds)}, got {_shown(value)}.")
    return number


def number_problem(value: Any, field: str, *, whole: bool) -> str | None:
    """Why `value` is no number by `parse_number`'s rule; None when it is one (bounds are the caller's)."""
    try:
        parse_number(value, field, whole=whole)
    except ValidationError as error:
        return error.message_dict[field][0]
    return None


def whole_number(value: Any, field: str, *, low: int, high: int, label: str | None = None) -> int:
    """An integer from `low` to `high` (`parse_number`'s rule: a JSON number or ASCII digits; never a bool)."""
    label = label or field
    text = value.strip().lstrip("+-") if isinstance(value, str) else ""
    if len(text) > MAX_NUMBER_TEXT_CHARS and text.isascii() and text.isdigit():  # far past any bound here
        raise refuse(field, f"{label} must be from {low} to {high} (got {_shown(value)}).")
    number = int(parse_number(value, field, whole=True, label=label, bounds=f" from {low} to {high}"))
    if number < 0 and low == 0:
        raise refuse(field, f"{label} cannot be negative (got {number}).")
    if not low <= number <= high:
        raise refuse(field, f"{label} must be from {low} to {high} (got {number}).")
    return number


def amount(value: Any, field: str, *, high: Decimal, label: str | None = None) -> Decimal:
    """A non-negative decimal amount (CPU cores, GiB) up to `high`, kept to 3 decimals (the columns')."""
    label = label or field
    if value is None or (isinstance(value, str) and not value.strip()):
        value = 0
    number = Decimal(parse_number(value, field, whole=False, label=label))
    if number < 0:
        raise refuse(field, f"{label} cannot be negative (got {number}).")
    if number > high:
        raise refuse(field, f"{label} must be at most {high} (got {number}).")
    return number.quantize(Decimal("0.001"), rounding=ROUND_HALF_UP)


def policy_seconds(value: Any, field: str, label: str) -> int:
    """A pool policy's duration (DESIGN §2b min_runtime_s, starvation_s; starved_min_runtime_s): whole seconds,
    0 (off) to 30 days."""
    try:
        return whole_number(value, field, low=0, high=MAX_POLICY_SECONDS, label=label)
    except ValidationError:
        raise refuse(field, f"{label} is a whole number of seconds from 0 (off) to {MAX_POLICY_SECONDS:,} "
                            f"(30 days), got {_shown(value)}.") from None


def grow_interval_seconds(value: Any, field: str = "grow_interval_s") -> int:
    """A pool's elastic grow interval (DESIGN §2c): whole seconds, 0 (grow every cycle) to a day."""
    try:
        return whole_number(value, field, low=0, high=MAX_GROW_INTERVAL_S, label="Grow interval")
    except ValidationError:
        raise refuse(field, f"Grow interval is a whole number of seconds from 0 (every cycle) to "
                            f"{MAX_GROW_INTERVAL_S:,} (1 day), got {_shown(value)}.") from None


STARVATION_HOLD_NEEDS_GUARD = (
    "The starvation hold extends the starvation guard: set a starvation time above 0 first (or leave the hold off)."
)
FLAG_TRUE = ("true", "on", "1", "yes")
FLAG_FALSE = ("false", "off", "0", "no", "")


def policy_flag(value: Any, field: str, label: str) -> bool:
    """A pool policy's switch (DESIGN §2b, e.g. starvation_hold): a bool, 0 / 1, or what a form sends
    for a checkbox ("on", "true", "1"; "false", "0", empty or nothing for off)."""
    if value is None or isinstance(value, bool):
        return bool(value)
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in FLAG_TRUE + FLAG_FALSE:
        return value.strip().lower() in FLAG_TRUE
    raise refuse(field, f"{label} is on or off (true or false), got {_shown(value)}.")


STARVED_RUNTIME_NEEDS_GUARD = (
    "The starved minimum runtime protects jobs the starvation guard let start: set a starvation time above 0 "
    "first (or set it to 0)."
)


def guard_extension_problems(*, starvation_s: int, starvation_hold: bool, starved_min_runtime_s: int) -> dict[str, str]:
    """Field -> why, for the policies that extend the starvation guard (the hold, the minimum runtime after
    starving) set while the guard is off; empty when the pool can have them."""
    if starvation_s > 0:
        return {}
    problems = {}
    if starvation_hold:
        problems["starvation_hold"] = STARVATION_HOLD_NEEDS_GUARD
    if starved_min_runtime_s > 0:
        problems["starved_min_runtime_s"] = STARVED_RUNTIME_NEEDS_GUARD
    return problems


def grace_seconds_value(value: Any, field: str = "grace_seconds") -> float | None:
    """Seconds between SIGTERM and SIGKILL (`parse_number`'s rule), 0 to MAX_GRACE_SECONDS; None when
    empty (the cluster default)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    seconds = parse_number(value, field, whole=False, label="The grace period (seconds)")
    if not 0 <= seconds <= MAX_GRACE_SECONDS:
        raise refuse(field, f"The grace period is 0–{MAX_GRACE_SECONDS:,} seconds (got {_shown(value)}); "
                            "empty: the cluster default.")
    return float(seconds)


# ------------------------------------------------------------------------------ ids and filters


def parse_id(value: Any) -> int | None:
    """An id typed in a URL or a filter: ASCII digits that fit a 64-bit column, else None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if 0 <= value < 10**MAX_ID_DIGITS else None
    if isinstance(value, str) and ID_RE.fullmatch(value):
        return int(value)
    return None


class IdConverter:
    """URL converter `<id:pk>`: like `<int:pk>`, but only ids a 64-bit column can hold (else 404)."""

    regex = f"[0-9]{{1,{MAX_ID_DIGITS}}}"

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value: int) -> str:
        return str(value)


def register_id_converter() -> None:
    """Register `<id:…>` once for every URLconf that uses it."""
    from django.urls.converters import get_converters, register_converter

    if "id" not in get_converters():
        register_converter(IdConverter, "id")


def query_text(value: Any, field: str, max_chars: int = MAX_QUERY_TEXT_CHARS) -> str:
    """A free-text filter: refused when it holds a NUL byte or is absurdly long."""
    value = value or ""
    problem = text_problem(value, max_chars)
    if problem:
        raise refuse(field, problem)
    return value


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
