"""Tools around the engine, outside it: DESIGN §4's scenario files (`scenario`, read by `scenario_read`:
`python manage.py scenario FILE`) and the engine benchmark's snapshots and timing (`bench`: `python
manage.py bench_engine`). Pure Python like the engine (no Django): the simulator and the tests use them
too."""
