"""Why a job waits: values made where the decision is made, turned into text once.

Each kind of reason is a small frozen value, so the cycle can pass it around, combine it (an
`acceptable` job fails both the quota and the idle path) and only then render it. The text is what
the console, the API and the job's events show: it names the quota, the resource and the numbers,
so a person knows what to change (a smaller job, a larger quota, idle resources on, or just wait).
"""

from __future__ import annotations

from dataclasses import dataclass

from .resources import amount_in_units, unit_name


@dataclass(frozen=True, slots=True)
class QuotaFull:
    """In Quota use plus the request would pass the `min` of the job's quota or an ancestor."""

    quota: str
    key: str
    need: int
    left: int
    limit: int

    def __str__(self) -> str:
        return (
            f"quota {self.quota} full: needs {amount_in_units(self.key, self.need)} {unit_name(self.key)}, "
            f"{amount_in_units(self.key, max(self.left, 0))} left of {amount_in_units(self.key, self.limit)}"
        )


@dataclass(frozen=True, slots=True)
class MaxReached:
    """Everything the subtree uses plus the request would pass a `max` (in or out of quota)."""

    quota: str
    key: str
    need: int
    left: int
    limit: int

    def __str__(self) -> str:
        return (
            f"quota {self.quota} max reached: needs {amount_in_units(self.key, self.need)} "
            f"{unit_name(self.key)}, {amount_in_units(self.key, max(self.left, 0))} left of max "
            f"{amount_in_units(self.key, self.limit)}"
        )


@dataclass(frozen=True, slots=True)
class NoRoom:
    """The quota fits but the pool does not: no free room and no idle jobs worth reclaiming."""

    demand: str  # Demand.describe(): "8 A100, 32 CPU cores", "2 pods of 8 A100 each", ...

    def __str__(self) -> str:
        return f"no room for {self.demand} on free capacity; reclaiming all idle jobs would not free enough"


@dataclass(frozen=True, slots=True)
class NoIdleRoom:
    """Idle pass: no free capacity left that no nominated job has reserved."""

    demand: str

    def __str__(self) -> str:
        return f"no free unreserved capacity for {self.demand}"


@dataclass(frozen=True, slots=True)
class WaitingForVictims:
    """Nominated: the reservation includes capacity of jobs whose pods are still exiting."""

    jobs: tuple[str, ...]

    def __str__(self) -> str:
        return f"waiting for {len(self.jobs)} job(s) to exit: {', '.join(self.jobs)}"


@dataclass(frozen=True, slots=True)
class NeverFits:
    """The pool cannot hold the job even when empty (nodes were removed after submission)."""

    why: str  # placement.unplaceable_reason()

    def __str__(self) -> str:
        return f"can never run: {self.why}"


@dataclass(frozen=True, slots=True)
class IdleOnly:
    """An `only` job never takes the quota path: its one reason is the idle one."""

    idle: object

    def __str__(self) -> str:
        return f"idle mode only: {self.idle}"


@dataclass(frozen=True, slots=True)
class BothPaths:
    """An `acceptable` job that neither fits its quota nor finds idle capacity."""

    in_quota: object
    idle: object

    def __str__(self) -> str:
        return f"{self.in_quota}; idle resources: {self.idle}"


@dataclass(frozen=True, slots=True)
class AnyModel:
    """A job that names no GPU model failed on every model; one reason per model, in model order."""

    reasons: tuple[object, ...]

    def __str__(self) -> str:
        return "; ".join(dict.fromkeys(str(reason) for reason in self.reasons))


@dataclass(frozen=True, slots=True)
class Refused:
    """Inputs the engine cannot schedule at all (unknown quota, pods naming two models, ...)."""

    text: str

    def __str__(self) -> str:
        return self.text


def any_model(reasons: list[object]) -> object:
    return reasons[0] if len(reasons) == 1 else AnyModel(tuple(reasons))
