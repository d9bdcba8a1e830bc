"""scheduler/simulator runs without Django (`python -m scheduler.simulator`): no module of it loads Django."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SIMULATOR = Path(__file__).resolve().parents[2] / "scheduler" / "simulator"


def loads_django(modules: list[str]) -> bool:
    code = f"import sys, {', '.join(modules)}\nprint('django' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=SIMULATOR.parents[1], capture_output=True, text=True, check=True
    )
    return result.stdout.strip() == "True"


def test_importing_every_simulator_module_loads_no_django():
    modules = [f"scheduler.simulator.{p.stem}" for p in sorted(SIMULATOR.glob("*.py")) if p.stem != "__main__"]
    assert len(modules) >= 12, f"simulator modules not found under {SIMULATOR}"
    assert not loads_django(modules)


def test_the_check_would_catch_one():
    assert loads_django(["scheduler.management.commands.simulate"])
