"""CPU and queries per submission (POST /api/v1/jobs/), in process: the Django test client against a
fresh test database (SQLite, or PostgreSQL with DATABASE_URL), no server, no scheduler.

CPU time (time.process_time), not wall time: it is what a gunicorn worker spends per request, and
it does not move with the machine's load the way wall time does.

    .venv/bin/python scripts/prof_submit.py                # 300 submissions, CPU ms each, queries
    .venv/bin/python scripts/prof_submit.py --profile 40   # and cProfile's 40 costliest calls
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/tidepool .venv/bin/python scripts/prof_submit.py
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ["TIDEPOOL_EMBEDDED_SCHEDULER"] = "0"
os.environ.setdefault("DEBUG", "0")  # as bin/cluster serves: DEBUG's query log costs CPU of its own
os.environ.setdefault("SECRET_KEY", "prof-submit-" + "x" * 50)  # DEBUG off refuses the development key
os.environ.setdefault("TIDEPOOL_HTTPS", "0")  # bin/cluster's nginx ends TLS; the test client speaks HTTP
os.environ.setdefault("ALLOWED_HOSTS", "testserver")


def body(n: int) -> str:
    return json.dumps({
        "name": f"b-{n}", "workspace": "vision", "quota": "team-vision", "command": "sleep 3600",
        "idle_mode": "off", "priority": 1 + n % 9,
        "roles": [{"name": "worker", "pod_count": 1, "gpus": 1, "cpu": 1, "memory_gib": 1}],
    })


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=300, help="timed submissions (default 300)")
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="print cProfile's N costliest calls")
    args = parser.parse_args()

    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import (
        CaptureQueriesContext,
        setup_databases,
        setup_test_environment,
        teardown_databases,
    )
    from django.utils import timezone

    from scheduler.models import Node
    from scheduler.services.nodes import node_register
    from scheduler.services.tokens import token_create

    setup_test_environment()
    old = setup_databases(1, False)
    try:
        call_command("seed_cluster", verbosity=0)
        for i in (1, 2):
            node_register(name=f"n{i}", gpu_type="A100", gpu_count=4, cpu=64, memory_gib=256, heartbeat=True)
        Node.objects.update(schedulable=True, lost=False, draining=False, last_heartbeat=timezone.now())
        secret = token_create(user=User.objects.get(username="alice"), name="p").secret
        client = Client(HTTP_AUTHORIZATION=f"Bearer {secret}")
        for n in range(20):  # warm: imports, caches, the token's last_used_at
            response = client.post("/api/v1/jobs/", body(n), content_type="application/json")
            assert response.status_code == 201, response.content
        with CaptureQueriesContext(connection) as queries:
            assert client.post("/api/v1/jobs/", body(20), content_type="application/json").status_code == 201
        sql = [query["sql"] for query in queries.captured_queries]  # now: the next request clears the log
        profile = cProfile.Profile() if args.profile else None
        start = time.process_time()
        if profile:
            profile.enable()
        for n in range(21, 21 + args.n):
            client.post("/api/v1/jobs/", body(n), content_type="application/json")
        if profile:
            profile.disable()
        cpu_ms = (time.process_time() - start) * 1000 / args.n
        print(f"{connection.vendor}: {cpu_ms:.2f} ms CPU per submission ({args.n}), "
              f"{len(sql)} queries per submission; load {os.getloadavg()[0]:.2f}")
        if os.environ.get("PROF_SQL"):
            for query in sql:
                print("  ", query[:300])
        if profile:
            pstats.Stats(profile).sort_stats("cumulative").print_stats(args.profile)
    finally:
        teardown_databases(old, 1)


if __name__ == "__main__":
    main()
