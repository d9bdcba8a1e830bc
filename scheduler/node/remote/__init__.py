"""The node agent (DESIGN §6): one process per GPU node holding only its node's key and the console's
URL. It talks to the control plane through the node API (/api/node/v1/, over the console's HTTP(S))
and imports no Django: nothing on the node can reach the database, the broker or Redis.

- `config.py`: its settings, from the environment (refuses control-plane credentials);
- `client.py`: the node API over HTTP, with the node's key;
- `agent.py`: register, heartbeat, adopt, converge level-triggered, report;
- `__main__.py`: `python -m scheduler.node.remote` (bin/node-agent).
"""
