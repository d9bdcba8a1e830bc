"""The scheduling engine: pure Python, no Django (DESIGN §5).

`cycle.run_cycle(Snapshot) -> Decisions` is the whole interface; the live loop, the simulator and
the scenario command all call it. The rules each have a module: `quota` (the tree and its
arithmetic), `placement` (gang best fit), `reclaim` (victims), `capacity` (free and being-released
capacity, indexed), `reasons` (why a job waits), `scenario` (DESIGN §4 files), `bench`.
"""
