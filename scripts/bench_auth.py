#!/usr/bin/env python3
"""CPU cost of HTTP Basic on the API, with and without the remembered-password cache.

    .venv/bin/python scripts/bench_auth.py [--requests 10] [--iterations 1000000]

In-process (Django's test client, a throwaway SQLite database): a user with a PBKDF2 password of
--iterations iterations (TIDEPOOL_PASSWORD_ITERATIONS) calls GET /api/workspaces/ --requests times
with HTTP Basic, cache off then on, and once with a wrong password. Prints CPU seconds per request.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=10)
    parser.add_argument("--iterations", type=int, default=1_000_000)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    database = Path(tempfile.mkdtemp()) / "auth.sqlite3"
    os.environ.update({"DJANGO_SETTINGS_MODULE": "config.settings", "DATABASE_URL": f"sqlite:///{database}",
                       "TIDEPOOL_PASSWORD_ITERATIONS": str(args.iterations), "ALLOWED_HOSTS": "testserver"})
    os.environ.pop("REDIS_URL", None)
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from scheduler.api.authentication import remembered

    call_command("migrate", verbosity=0)
    get_user_model().objects.create_user("bench", password="bench-password-1")
    client = Client()

    def per_request(password: str, cache_seconds: float, expected: int) -> float:
        settings.TIDEPOOL_BASIC_AUTH_CACHE_SECONDS = cache_seconds
        remembered.clear()
        header = "Basic " + base64.b64encode(f"bench:{password}".encode()).decode()
        started = time.process_time()
        for _ in range(args.requests):
            status = client.get("/api/workspaces/", HTTP_AUTHORIZATION=header).status_code
            if status != expected:
                raise SystemExit(f"expected {expected}, got {status}")
        return (time.process_time() - started) / args.requests

    result = {
        "iterations": args.iterations,
        "requests": args.requests,
        "cpu_s_per_request_no_cache": round(per_request("bench-password-1", 0, 200), 4),
        "cpu_s_per_request_cached": round(per_request("bench-password-1", 60, 200), 4),
        "cpu_s_per_request_wrong_password": round(per_request("wrong", 60, 403), 4),
    }
    print(f"HTTP Basic, PBKDF2 × {args.iterations}: {result['cpu_s_per_request_no_cache']} s CPU per request "
          f"without the cache, {result['cpu_s_per_request_cached']} s with it (one hash per process and minute), "
          f"{result['cpu_s_per_request_wrong_password']} s for a wrong password")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
