"""`python -m scheduler.node.remote` (bin/node-agent): the node agent, with its node's key only.

Exit status: 0 after SIGTERM/SIGINT (the pods run on, for the next agent to adopt), 2 for a setting
that is missing or wrong (the message names it), 3 when another agent took the node over, 4 when
the console refused the key (revoked or rotated: give the agent the new key).
"""

from __future__ import annotations

import logging
import os
import signal
import sys

from scheduler.node.remote.agent import NodeAgent
from scheduler.node.remote.client import ConsoleRefused
from scheduler.node.remote.config import AgentConfigError, config_from_env


def main() -> int:
    logging.basicConfig(level=os.environ.get("TIDEPOOL_LOG_LEVEL", "INFO").upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = config_from_env(os.environ)
    except AgentConfigError as error:
        print(f"tidepool node agent: {error}", file=sys.stderr)
        return 2
    agent = NodeAgent(config)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: agent.stop())
    try:
        return agent.run()
    except ConsoleRefused as error:
        print(f"tidepool node agent: the console refused this node's key: {error.detail}", file=sys.stderr)
        return 4


if __name__ == "__main__":
    sys.exit(main())
