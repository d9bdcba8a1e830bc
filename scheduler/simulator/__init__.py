"""Virtual-time replay of GPU-cluster traces through the production engine (docs/simulator.md).

`traces` loads workloads and `clusters` the clusters they meet; `policies` turns a cluster into
what the engine sees under fifo / strict / idle / pool (`fifo` adds head-of-line blocking); `replay`
runs the discrete-event loop over `jobs` (each job's state), `ledger` (GPU bookkeeping and the
pruning bound) and `work` (checkpoints, restarts, redone work); `model` holds its inputs and
outputs; `metrics`, `charts` and `report` turn replays into figures and an HTML page; `cli` is the
command line shared by `manage.py simulate` and `python -m scheduler.simulator`. Nothing here
imports Django.
"""
