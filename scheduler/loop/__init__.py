"""The scheduler process: snapshot in, engine, decisions applied through services (DESIGN §5).

- `cycle`: one cycle (`schedule_once`); `snapshot`: rows → engine snapshot;
- `housekeeping`: backoffs, lost nodes, maximum running time, hangs;
- `leader`: the PostgreSQL advisory lock that elects one loop; `runner`: `run_forever`;
- `wakeup`: the Redis listener that wakes the loop when a service asks (scheduler/publish.py).
"""
