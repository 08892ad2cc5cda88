"""Faust's bound_agent example on streamkit: every action the timer sends reaches stage 1 and,
passed on through stage 1's channel sink, is either taken by stage 2 or dead-lettered by it.

Which of the three happens to a round of actions depends on the second it runs in (the example
fails stage 1 at ``now % 3 == 0``, stage 2 at ``== 1``), and a 3-second timer keeps that phase
for the worker's life. A worker whose rounds all fail at stage 1 never uses the sink, so the
test starts another, a second later in the 3-second cycle."""
from __future__ import annotations

import re
import time
from collections import Counter

from tests.faust_apps.worker import AppWorker
from tests.helpers import wait_until

ARRIVED = re.compile(r"\[(stage1|stage2)\] action arrived: .*device_id=(\d+)")
DEAD = re.compile(r"\[dead letter\] arrived: .*stage='(stage1|stage2)'.*device_id=(\d+)")
PROBLEMS = ("Traceback", "not callable", "failed on", "policy=")


def tally(worker: AppWorker) -> dict[str, Counter]:
    """Device ids per outcome: arrived at stage1/stage2, dead-lettered by stage1/stage2."""
    found: dict[str, Counter] = {"stage1": Counter(), "stage2": Counter(), "dead1": Counter(), "dead2": Counter()}
    for line in list(worker.lines):
        problem = next((p for p in PROBLEMS if p in line), None)
        assert problem is None, f"{problem!r} in the worker's output:\n{worker.output()[-4000:]}"
        if m := ARRIVED.search(line):
            found[m[1]][m[2]] += 1
        elif m := DEAD.search(line):
            found["dead" + m[1][-1]][m[2]] += 1
    return found


def settled(worker: AppWorker, last: list) -> dict[str, Counter] | None:
    """The tally once stage 1 passed actions on and all of them came out of stage 2 (taken or
    dead-lettered), the same on two polls in a row (no round half done)."""
    now = tally(worker)
    balanced = +now["stage1"] and now["stage1"] == now["stage2"] + now["dead2"]
    same = last and last[0] == now
    last[:] = [now]
    return now if balanced and same else None


def test_actions_pass_from_stage1_to_stage2_through_a_channel_sink(broker_address, tmp_path):
    start = time.time()
    for attempt in range(3):
        worker = AppWorker("bound_agent", broker_address, tmp_path / f"worker-{attempt}")
        try:
            # the first round: did stage 1 pass anything on, or fail it all (its phase)?
            wait_until(lambda: any(tally(worker).values()), 60, "the timer's first round of actions at stage 1")  # noqa: B023 - called within this same iteration
            wait_until(lambda: (lambda t: +t["stage1"] or +t["dead1"])(tally(worker)), 10, "stage 1 to answer")  # noqa: B023 - called within this same iteration
            if +tally(worker)["stage1"]:
                last: list = []
                outcome = wait_until(lambda: settled(worker, last), 30, "stage 2 to take or dead-letter each "  # noqa: B023 - called within this same iteration
                                     "action stage 1 passed on")
                break
        finally:
            assert worker.stop() == 0, worker.output()[-4000:]
        # a second later in the timer's 3-second cycle than this worker started
        shifted = start + 1 + 3 * (attempt + 1)
        wait_until(lambda: time.time() >= shifted, 10, "the next start, a second later in the cycle", interval=0.01)  # noqa: B023 - called within this same iteration
        start = shifted
    else:
        raise AssertionError("three workers' rounds all failed at stage 1: the sink was never used")

    # every action stage 1 passed on reached stage 2 once, through the channel sink
    assert outcome["stage2"] + outcome["dead2"] == outcome["stage1"]
    assert sum(outcome["stage1"].values()) >= 3  # a round is 3 to 101 actions
