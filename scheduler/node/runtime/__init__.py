"""Running pods on a node: processes, logs, progress files and GPU inventory (DESIGN §3, §5).

Pure Python, no Django import: the local executor (embedded mode) and the Celery worker on
each GPU node both drive a `process.PodSupervisor` and report what it tells them to the
database. Modules:

- `process`: `PodSpec`, `pod_environment`, `PodSupervisor` (start, terminate, exits).
- `progress`: `read_progress` for the progress file a pod writes.
- `logs`: `tail` and `read_from` for pod logs.
- `gpus`: `detect_gpus` (NVML) and `declared_inventory`; `python -m scheduler.node.runtime.gpus`.

Nothing is re-exported here, so that `python -m scheduler.node.runtime.gpus` runs the module once.
"""
