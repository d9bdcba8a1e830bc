"""Request body parsers of the REST API: JSON with a size and a nesting cap.

DRF's own JSONParser reads the whole stream whatever DATA_UPLOAD_MAX_MEMORY_SIZE says, and a body
nested 5,000 deep makes `json.loads` raise RecursionError, which is no ParseError: a 500. This one
answers 400 for both (the server in front also refuses bodies past the cap before reading them:
config/asgi.py).
"""

from __future__ import annotations

import codecs
import json
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from scheduler.validation import MAX_JSON_DEPTH


def too_deep(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether containers nest deeper than `limit` (iterative: no recursion of our own)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


class BoundedJSONParser(JSONParser):
    """JSON bodies of at most DATA_UPLOAD_MAX_MEMORY_SIZE bytes, nested at most MAX_JSON_DEPTH deep."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: dict | None = None) -> Any:
        parser_context = parser_context or {}
        encoding = parser_context.get("encoding", settings.DEFAULT_CHARSET)
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raw = stream.read(limit + 1) if limit is not None else stream.read()
        if limit is not None and len(raw) > limit:
            raise ParseError(f"The request body is larger than {limit} bytes.")
        try:
            text = codecs.decode(raw, encoding)
            data = json.loads(text, parse_constant=_refuse_constant)
        except RecursionError:
            raise ParseError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels.") from None
        except (ValueError, UnicodeDecodeError) as error:
            raise ParseError(f"JSON parse error - {error}") from None
        if too_deep(data):
            raise ParseError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels.")
        return data


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def exception_handler(exc: Exception, context: dict) -> Any:
    """DRF's handler, plus Django's "body too large" (raised while DRF reads request.body) as a JSON 413."""
    from django.core.exceptions import RequestDataTooBig
    from rest_framework.response import Response
    from rest_framework.views import exception_handler as drf_handler

    if isinstance(exc, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return Response({"detail": f"The request body is larger than {limit} bytes."}, status=413)
    return drf_handler(exc, context)
