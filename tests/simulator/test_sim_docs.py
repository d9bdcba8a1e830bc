"""Every simulator command written in docs/simulator.md parses, and its columns are valid: the figures
there are quoted next to the command that gives them, so a renamed option or modifier must not leave
a command behind that no longer runs."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from scheduler.simulator import cli

DOC = Path(__file__).resolve().parents[2] / "docs" / "simulator.md"
PREFIXES = ("python -m scheduler.simulator ", "python manage.py simulate ")


def documented_commands() -> list[str]:
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", DOC.read_text(), flags=re.S):
        joined = block.replace("\\\n", "")  # continuation lines, also inside a --policy list
        for line in joined.splitlines():
            line = line.split("#", 1)[0].strip()
            if line.startswith(PREFIXES):
                commands.append(line)
    return commands


COMMANDS = documented_commands()


def test_the_simulator_doc_has_its_commands():
    assert len(COMMANDS) >= 15


@pytest.mark.parametrize("command", COMMANDS)
def test_a_documented_command_parses_and_its_columns_are_valid(command):
    prefix = next(p for p in PREFIXES if command.startswith(p))
    parser = argparse.ArgumentParser(exit_on_error=False)
    cli.add_arguments(parser)
    options = vars(parser.parse_args(shlex.split(command[len(prefix):])))
    assert cli.policy_columns(options)  # raises SimulationError on an unknown policy, modifier or setting
