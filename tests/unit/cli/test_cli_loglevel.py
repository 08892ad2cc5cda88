"""``streamkit worker -l``: a level Python or Faust knows, any case; anything else is one line, exit 2."""
import logging

import pytest
from click.testing import CliRunner

from streamkit.cli.main import LOG_LEVELS, cli


def test_an_unknown_level_is_one_line_and_exit_2():
    result = CliRunner().invoke(cli, ["worker", "-A", "no_such_module:app", "-l", "verbose"])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert "-l/--loglevel 'verbose'" in lines[0] and "crit, critical" in lines[0] and "debug" in lines[0]


@pytest.mark.parametrize("given", ["crit", "CRITICAL", "Error", "warn", "WARNING", "info", "DEBUG"])
def test_faust_and_python_levels_are_accepted_in_any_case(given):
    result = CliRunner().invoke(cli, ["worker", "-A", "no_such_module:app", "-l", given])
    assert result.exit_code == 2 and "no_such_module" in result.output, result.output  # past -l: the app is next
    assert logging.getLevelName(LOG_LEVELS[given.lower()]) in ("CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG")
