"""Virtual-time replay of GPU-cluster traces through the production engine (docs/simulator.md).

`traces` loads workloads and clusters, `policies` turns a cluster into what the engine sees under
strict / idle / pool, `replay` runs the discrete-event loop, `metrics` and `report` turn a replay
into figures and an HTML page, `cli` is the command line shared by `manage.py simulate` and
`python -m scheduler.simulator`. Nothing here imports Django.
"""
