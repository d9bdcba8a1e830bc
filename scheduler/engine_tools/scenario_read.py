"""Reading scenario files (DESIGN §4): typed access to the parsed mapping that names the file, the
place in it and what is wrong when a value does not make sense."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


class ScenarioError(ValueError):
    """A malformed scenario file: `file: path: reason`."""

    def __init__(self, file: str, path: str, reason: str) -> None:
        self.file, self.path, self.reason = file, path, reason
        super().__init__(f"{file}: {path}: {reason}" if path else f"{file}: {reason}")



# --- reading values ----------------------------------------------------------------------------------------


class Reader:
    """Typed access to the parsed mapping, raising ScenarioError with the path of the bad value."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, path: str, reason: str) -> ScenarioError:
        return ScenarioError(self.source, path, reason)

    def mapping(self, value: Any, path: str, allowed: Sequence[str]) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(path, f"expected a mapping, got {kind(value)}")
        for key in value:
            if key not in allowed:
                raise self.fail(f"{path}.{key}" if path else str(key), f"unknown key (allowed: {', '.join(allowed)})")
        return value

    def items(self, value: Any, path: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(path, f"expected a list, got {kind(value)}")
        return value

    def text(self, value: Any, path: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(path, f"expected a non-empty string, got {kind(value)}")
        return value

    def integer(self, value: Any, path: str, low: int | None = 0, high: int | None = None) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(path, f"expected a whole number, got {kind(value)}")
        return self._bounded(value, path, low, high)

    def number(self, value: Any, path: str, low: float | None = 0) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(path, f"expected a number, got {kind(value)}")
        return self._bounded(value, path, low, None)

    def flag(self, value: Any, path: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(path, f"expected true or false, got {kind(value)}")
        return value

    def _bounded(self, value: Any, path: str, low: float | None, high: float | None) -> Any:
        if low is not None and value < low:
            raise self.fail(path, "must not be negative" if low == 0 else f"must be at least {low}, got {value}")
        if high is not None and value > high:
            raise self.fail(path, f"must be at most {high}, got {value}")
        return value

    def millicores(self, value: Any, path: str) -> int:
        return round(self.number(value, path) * 1000)

    def mib(self, value: Any, path: str) -> int:
        return round(self.number(value, path) * 1024)


def kind(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, str):
        return f"'{value}'"
    return type(value).__name__ if isinstance(value, (list, dict, Mapping)) else repr(value)
