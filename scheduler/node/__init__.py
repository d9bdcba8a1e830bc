"""The node-worker process (DESIGN §5): runs the pods the scheduler assigns to a node.

- `runtime/`: pod processes, logs, progress files, GPU inventory (pure Python, no Django);
- `agent`: a PodSupervisor that reports to the lifecycle services; `specs`: Pod row → PodSpec;
- `worker` and `tasks`: the Celery node worker (registration, heartbeat, drain, control commands);
- `local`: the embedded executor, which runs the demo nodes' pods in the console process;
- `orphans`: pods a dead predecessor left; `logs`: serving a pod's log to the console.

Never imports scheduler.loop or console (a test keeps the rule).
"""
