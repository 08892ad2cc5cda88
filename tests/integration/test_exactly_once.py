"""Exactly-once on a broker: a clean run counted exactly, and the SIGKILL chaos run (gated)."""
import pytest

from streamkit.testing.pytest_plugin import require_capability
from tests.chaos.run import main, run


def test_clean_exactly_once_run_gives_exact_outputs_and_table(broker_address, tmp_path, capsys):
    """The commit path (valid on the dev broker): 20,000 inputs, 2 workers, no kills; run through
    the harness's command line, as the guide shows it."""
    status = main(["--broker", broker_address, "--driver", "confluent", "--records", "20000", "--kills", "0",
                   "--workers", "2", "--workdir", str(tmp_path)])
    line = capsys.readouterr().out.strip().splitlines()[-1]
    with capsys.disabled():
        print("\n" + line)
    assert status == 0
    assert "inputs=20000 outputs=20000 missing=0 duplicated=0 table_under=0 table_over=0" in line


@pytest.mark.requires("read_committed_hides_aborted")
@pytest.mark.parametrize("driver", ["confluent", "aiokafka"])
def test_chaos_twenty_sigkills_lose_and_duplicate_nothing(broker_address, driver, capabilities, tmp_path):
    if driver == "aiokafka":
        require_capability(capabilities, "aiokafka_transactions")
    summary = run(broker_address, driver, records=60_000, kills=20, workers=3, workdir=tmp_path, seed=20)
    print("\n" + summary.line())
    assert summary.ok, summary.line() + f" (worker logs in {tmp_path})"


@pytest.mark.requires("read_committed_hides_aborted")
@pytest.mark.parametrize("driver", ["confluent", "aiokafka"])
def test_chaos_sigkills_of_a_fold_lose_and_duplicate_nothing(broker_address, driver, capabilities, tmp_path):
    """The same sum as an ``@app.fold``: the worker runs it over each batch in hand (agents/functions.py)."""
    if driver == "aiokafka":
        require_capability(capabilities, "aiokafka_transactions")
    summary = run(broker_address, driver, records=20_000, kills=6, workers=3, workdir=tmp_path, seed=6, fold=True)
    print("\n" + summary.line())
    assert summary.ok and summary.scenario == "kill-fold", summary.line() + f" (worker logs in {tmp_path})"
