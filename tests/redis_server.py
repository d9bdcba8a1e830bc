"""A private redis-server on a free port for tests that stop and restart Redis (never the shared one)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
import redis

from tests.waiting import wait_for


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PrivateRedis:
    def __init__(self, directory: Path) -> None:
        if not shutil.which("redis-server"):
            pytest.skip("needs redis-server on the PATH (Debian: apt-get install redis-server)")
        self.port = free_port()
        self.directory = directory
        self.process: subprocess.Popen | None = None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def answers(self) -> bool:
        try:
            return bool(redis.Redis(port=self.port, socket_timeout=0.5, socket_connect_timeout=0.5).ping())
        except redis.RedisError:
            return False

    def start(self) -> float:
        """Start it and return the moment (monotonic) it first answered PING."""
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.directory)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(self.answers, 10, "redis-server to answer", step=0.02)
        return time.monotonic()

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)
            self.process = None
        wait_for(lambda: not self.answers(), 10, "redis-server to stop", step=0.05)
