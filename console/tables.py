"""The job list: its query (filters, sort, page) and one way of rendering its rows.

The page view and the websocket consumer both call `build_page` and `render_rows`, so a row
looks the same whether it arrived with the page or over the socket.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import parse_qs, urlencode

from django.contrib.auth.models import AbstractBaseUser
from django.http import QueryDict
from django.template.loader import render_to_string

from scheduler.models import IdleMode, Job
from scheduler.selectors import (
    DEFAULT_JOB_SORT,
    JOB_SORTS,
    STATUS_GROUPS,
    JobFilters,
    job_list,
    visible_jobs,
    with_row_data,
)
from scheduler.states import JOB_STATUS_VALUES, JobStatus
from scheduler.validation import parse_id

PER_PAGE = 50
ROW_TEMPLATE = "console/_job_row.html"
ROWS_TEMPLATE = "console/_job_rows.html"
PAGER_TEMPLATE = "console/_job_pager.html"

STATUS_FILTER_CHOICES: list[tuple[str, str]] = [
    ("", "Any status"),
    ("active", "Active (not finished)"),
    ("pending", "Pending (Queuing, Restarting, Preempted resuming)"),
    ("finished", "Finished"),
    *[(status.value, status.label) for status in JobStatus],
]
SORT_CHOICES: list[tuple[str, str]] = [
    ("-submitted", "Newest first"),
    ("submitted", "Oldest first"),
    ("-priority", "Priority, then queue time"),
    ("name", "Name"),
    ("status", "Status"),
    ("quota", "Quota"),
]


def _int(value: str | None) -> int | None:
    """An id or page number from the URL; a malformed one (e.g. "²", 2⁶⁴) is ignored."""
    return parse_id(value)


@dataclass(frozen=True)
class JobListQuery:
    filters: JobFilters = JobFilters()
    sort: str = DEFAULT_JOB_SORT
    page: int = 1

    @classmethod
    def from_params(cls, params: QueryDict | dict[str, list[str]]) -> JobListQuery:
        """Unknown or malformed values are ignored rather than refused: a list URL always renders."""

        def first(key: str) -> str:
            value = params.get(key)
            if isinstance(value, list):
                value = value[0] if value else ""
            return (value or "").strip()

        status = first("status")
        if status and status not in STATUS_GROUPS and status not in JOB_STATUS_VALUES:
            status = ""
        idle_mode = first("idle_mode")
        if idle_mode not in IdleMode.values:
            idle_mode = ""
        sort = first("sort")
        page = _int(first("page")) or 1
        return cls(
            filters=JobFilters(
                status=status,
                quota_id=_int(first("quota")),
                workspace_id=_int(first("workspace")),
                idle_mode=idle_mode,
                mine=first("mine") in {"1", "on", "true"},
                name=first("q").replace("\x00", "")[:100],
            ),
            sort=sort if sort in JOB_SORTS else DEFAULT_JOB_SORT,
            page=max(1, page),
        )

    @classmethod
    def from_query_string(cls, query_string: str) -> JobListQuery:
        return cls.from_params(parse_qs(query_string))

    def params(self, **overrides: Any) -> dict[str, str]:
        f = self.filters
        values = {
            "status": f.status,
            "quota": f.quota_id or "",
            "workspace": f.workspace_id or "",
            "idle_mode": f.idle_mode,
            "mine": "1" if f.mine else "",
            "q": f.name,
            "sort": self.sort if self.sort != DEFAULT_JOB_SORT else "",
            "page": self.page if self.page != 1 else "",
        }
        values.update(overrides)
        return {key: str(value) for key, value in values.items() if value not in ("", None)}

    def urlencode(self, **overrides: Any) -> str:
        return urlencode(self.params(**overrides))

    def with_page(self, page: int) -> JobListQuery:
        return replace(self, page=page)

    @property
    def is_filtered(self) -> bool:
        return self.filters != JobFilters()


@dataclass
class JobPage:
    query: JobListQuery
    jobs: list[Job]
    total: int
    page: int
    num_pages: int

    @property
    def ids(self) -> list[int]:
        return [job.pk for job in self.jobs]

    @property
    def first_index(self) -> int:
        return (self.page - 1) * PER_PAGE + 1 if self.total else 0

    @property
    def last_index(self) -> int:
        return (self.page - 1) * PER_PAGE + len(self.jobs)

    def page_url(self, page: int) -> str:
        query = self.query.urlencode(page=page if page != 1 else "")
        return f"?{query}" if query else "?"


def _clamp_page(page: int, total: int) -> tuple[int, int]:
    num_pages = max(1, math.ceil(total / PER_PAGE))
    return min(page, num_pages), num_pages


def page_ids(*, user: AbstractBaseUser, query: JobListQuery) -> tuple[list[int], int]:
    """The ids on the query's page and the total: two cheap queries, to see whether a page changed."""
    jobs = job_list(user=user, filters=query.filters, sort=query.sort)
    total = jobs.count()
    page, _ = _clamp_page(query.page, total)
    start = (page - 1) * PER_PAGE
    return list(jobs.values_list("pk", flat=True)[start : start + PER_PAGE]), total


def build_page(*, user: AbstractBaseUser, query: JobListQuery) -> JobPage:
    """One page of visible jobs with everything their rows show, in a constant number of queries."""
    jobs = job_list(user=user, filters=query.filters, sort=query.sort)
    total = jobs.count()
    page, num_pages = _clamp_page(query.page, total)
    start = (page - 1) * PER_PAGE
    rows = list(with_row_data(jobs)[start : start + PER_PAGE]) if total else []
    return JobPage(query=query, jobs=rows, total=total, page=page, num_pages=num_pages)


def visible_rows(*, user: AbstractBaseUser, job_ids: list[int]) -> list[Job]:
    """Re-read changed jobs through the permission rule; the ones the user may not see are dropped."""
    return list(with_row_data(visible_jobs(user=user).filter(pk__in=job_ids)))


def render_row(job: Job) -> str:
    return render_to_string(ROW_TEMPLATE, {"job": job})


def render_rows(page: JobPage) -> str:
    return render_to_string(ROWS_TEMPLATE, {"page": page})


def render_pager(page: JobPage) -> str:
    return render_to_string(PAGER_TEMPLATE, {"page": page})
