"""Joins under SIGKILLs on a broker (tests/chaos/joins.py): a stream-table enrichment through a
repartition and a windowed stream-stream join (outer under exactly-once, left under at-least-once:
every unpaired record alone under its own key), compared with the batch truth. exactly_once:
equal to it, no duplicates (needs a broker that hides aborted records); at_least_once: nothing
missing or wrong (needs exact end offsets, to know when the workers are done)."""
import pytest

from streamkit.testing.pytest_plugin import require_capability
from tests.chaos.harness import kept
from tests.chaos.joins import run


@pytest.mark.requires("read_committed_hides_aborted", "end_offsets_exact")
@pytest.mark.parametrize("driver", ["confluent", "aiokafka"])
def test_joins_under_six_sigkills_equal_the_batch_truth_exactly_once(broker_address, driver, capabilities, tmp_path):
    if driver == "aiokafka":
        require_capability(capabilities, "aiokafka_transactions")
    summary = run(broker_address, driver, how="outer", records=20000, kills=6, workdir=tmp_path, seed=6)
    print("\n" + summary.line())
    assert summary.kills == 6
    assert summary.ok, summary.line() + kept(summary, tmp_path)


@pytest.mark.requires("end_offsets_exact")
@pytest.mark.parametrize("driver", ["confluent", "aiokafka"])
def test_joins_under_sigkills_miss_nothing_at_least_once(broker_address, driver, tmp_path):
    summary = run(broker_address, driver, guarantee="at_least_once", how="left", records=10000, kills=4,
                  workdir=tmp_path, seed=4)
    print("\n" + summary.line())
    assert summary.kills == 4
    assert summary.ok, summary.line() + kept(summary, tmp_path)
