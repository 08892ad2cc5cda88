"""Faust's tableofset example on streamkit: its commands take their two arguments in the order
declared, and its SetTable (``value_type=str``: the type of the elements) keeps sets across
checkpoints, its changelog a JSON list of the elements."""
from __future__ import annotations

import ast

import orjson

from streamkit.testing import read_topic
from tests.faust_apps import tableofset
from tests.faust_apps.worker import AppWorker, run_command
from tests.helpers import wait_until


def current(worker: AppWorker, after: int) -> set[str]:
    """The set printed by the last ``TABLE CUR:`` line, once there are more than ``after``."""
    lines = worker.wait_for_line("TABLE CUR: ", times=after + 1)
    return ast.literal_eval(lines[-1].split("TABLE CUR: ", 1)[1])


def test_people_join_and_leave_a_location_across_checkpoints(broker_address, tmp_path, unique):
    location = f"oslo-{unique}"
    changelog = tableofset.table.changelog.name
    worker = AppWorker("tableofset", broker_address, tmp_path / "worker")
    try:
        worker.wait_for_line("TABLE NOW:", timeout=90)  # the timer's first dump: the worker runs

        def command(*args: str) -> None:
            done = run_command("tableofset", broker_address, tmp_path, *args)
            assert done.returncode == 0, done.stderr[-3000:]

        command("joining", location, "alice")
        worker.wait_for_line(f"- Alice joined {location}")  # location first, name second, as declared
        assert current(worker, 0) == {"alice"}

        def checkpointed() -> list:
            return [orjson.loads(m.value()) for m in read_topic(broker_address, changelog, timeout=20, to_end=True)
                    if m.key() == location.encode()]

        # the set went out at a checkpoint as the list of its elements; the table reads it back from there
        assert wait_until(checkpointed, 30, "the checkpoint to write alice's location to the changelog") == [["alice"]]
        command("joining", location, "bob")
        assert current(worker, 1) == {"alice", "bob"}
        wait_until(lambda: sorted(checkpointed()[-1]) == ["alice", "bob"], 30, "bob's join checkpointed")
        command("leaving", location, "alice")
        worker.wait_for_line(f"- Alice left {location}")
        assert current(worker, 2) == {"bob"}
    finally:
        code = worker.stop()
    assert code == 0, worker.output()[-4000:]
    assert "Traceback" not in worker.output() and "policy=" not in worker.output(), worker.output()[-4000:]
