"""scale_out.py fails a run whose workers did not share the 4 input partitions 2 + 2 in the
measured window (a 1 + 3 split caps 2 workers / 1 at 4/3 and hid in the ratio), naming the
split; and a run whose output misses an input's sequence number."""
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"


@pytest.fixture
def scale_out():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import scale_out
    finally:
        sys.path.remove(str(BENCHMARKS))
    return scale_out


def worker(assignments, processed, rate, start=100.0, end=110.0):
    """One worker's RESULT: assignment changes, then ``rate`` records/s from ``start`` to ``end``."""
    samples = [[start + i * 0.5, min(processed, int(rate * i * 0.5))] for i in range(int((end - start) / 0.5) + 1)]
    return {"assignments": assignments, "last_record_at": end, "processed": processed, "samples": samples}


def test_an_even_split_is_measured_and_recorded_per_worker(scale_out):
    results = [worker([[90.0, []], [99.0, [0, 1]]], 50_000, 5000), worker([[90.0, []], [100.0, [3, 2]]], 50_000, 5000)]
    found = scale_out.stable_window(results, 2)
    assert "error" not in found, found
    assert found["split"] == [[0, 1], [2, 3]] and found["partitions"] == [2, 2]
    assert found["window_s"] == pytest.approx(10.0) and found["records_per_s"] == pytest.approx(10_000)


def test_a_one_and_three_split_fails_naming_it(scale_out):
    results = [worker([[90.0, []], [99.0, [0]]], 25_000, 2500), worker([[90.0, []], [99.5, [1, 2, 3]]], 75_000, 7500)]
    found = scale_out.stable_window(results, 2)
    assert found["error"] == ("partition split 1 + 3 ([0], [1, 2, 3]) in the measured window, not 2 + 2 of 4"), found
    assert found["split"] == [[0], [1, 2, 3]] and "records_per_s" not in found
    assert scale_out.describe(found).startswith("FAILED partition split 1 + 3")


def test_the_split_is_the_one_in_the_window_not_an_earlier_one(scale_out):
    # the first worker held all four until its partner joined; in the window it held two
    results = [worker([[90.0, []], [95.0, [0, 1, 2, 3]], [99.0, [0, 1]]], 50_000, 5000),
               worker([[90.0, []], [99.5, [2, 3]]], 50_000, 5000)]
    assert scale_out.stable_window(results, 2)["split"] == [[0, 1], [2, 3]]


def test_the_split_check(scale_out):
    assert scale_out.split_problem([[0, 1, 2, 3]]) is None
    assert scale_out.split_problem([[2, 3], [0, 1]]) is None
    assert "4 + 4" in scale_out.split_problem([[0, 1, 2, 3], [0, 1, 2, 3]])  # two groups, not one
    assert "2 + 1" in scale_out.split_problem([[0, 1], [2]])  # one partition owned by nobody
    assert "0 + 4" in scale_out.split_problem([[], [0, 1, 2, 3]])


def test_outputs_hold_every_input_at_least_once(scale_out):
    assert scale_out.outputs_problem(3, 3, {0, 1, 2}) is None
    assert scale_out.outputs_problem(3, 5, {0, 1, 2}) is None  # at least once: repeats allowed
    assert "2 distinct ids of the 3" in scale_out.outputs_problem(3, 3, {0, 1})
    assert scale_out.outputs_problem(3, 2, {0, 1, 2}) is not None


def test_the_one_command_parser_takes_each_members_result(scale_out):
    found = scale_out.MEMBER_RESULT.match('[w2] RESULT {"processed": 3}')
    assert found and found.group(1) == "w2" and found.group(2) == '{"processed": 3}'
    assert scale_out.MEMBER_RESULT.match("[w1] INFO assigned 2 partitions") is None
