"""The warning for a local table store ahead of the committed offsets says what happened: a
standby only when a standby applied something; without standbys, the checkpoint that did not
commit (here: a worker stopped between its changelog flush and its offset commit)."""
from __future__ import annotations

import logging
import uuid

import streamkit as sk
from streamkit.testing import wait_for
from tests.unit.runtime.test_checkpoint_faults import broker_of, send_inputs


def build(tmp_path, name):
    app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, store="rocksdb://",
                 data_dir=str(tmp_path), processing_guarantee="at_least_once", commit_interval=3600)
    numbers = app.topic("numbers", key_type=str, value_type=int, partitions=1)
    sums = app.Table("sums", default=int)
    processed: list[int] = []

    @app.agent(numbers)
    async def add(stream):
        async for event in stream.events():
            sums[event.key] += event.value
            processed.append(event.value)

    return app, numbers, sums, processed


def warned_ahead(caplog) -> str:
    lines = [r.getMessage() for r in caplog.records if "ahead of the committed offsets" in r.getMessage()]
    assert len(lines) == 1, lines
    return lines[0]


async def restart(tmp_path, name, caplog) -> str:
    """A new worker on the same data dir; the warning it gave for its store ahead."""
    caplog.set_level(logging.WARNING, logger="streamkit.tables")
    second, _, _, _ = build(tmp_path, name)
    async with second.running():
        await wait_for(lambda: second.runtime.tables.stores_reset >= 1, 10, message="the store ahead was reset")
    return warned_ahead(caplog)


async def test_a_store_ahead_without_standbys_is_not_blamed_on_a_standby(tmp_path, caplog):
    name = f"ahead-{uuid.uuid4().hex[:6]}"
    app, numbers, _, processed = build(tmp_path, name)
    async with app.running():
        await wait_for(lambda: app.runtime.assigned and app.runtime.tables.ready, 10, message="ready")
        send_inputs(app, numbers, 0, 20)
        await wait_for(lambda: len(processed) >= 20, 10, message="20 processed")
        await app.runtime.checkpoint.commit()
        send_inputs(app, numbers, 20, 40)
        await wait_for(lambda: len(processed) >= 40, 10, message="40 processed")
        broker_of(app).faults.fail_commits = 1_000_000  # the changelog and its mark go out, the commit fails
        try:
            await app.runtime.checkpoint.commit()
        except Exception:
            pass
        else:
            raise AssertionError("the injected commit failure did not fail the checkpoint")
    broker_of(app).faults.fail_commits = 0
    line = await restart(tmp_path, name, caplog)
    assert "standby" not in line and "a checkpoint that never committed: a worker stopped" in line, line


async def test_a_store_ahead_of_offsets_the_broker_lost_says_so(tmp_path, caplog):
    """As after a dev-broker restart: the group's committed offsets are gone, the local store stays."""
    name = f"ahead-{uuid.uuid4().hex[:6]}"
    app, numbers, _, processed = build(tmp_path, name)
    async with app.running():
        await wait_for(lambda: app.runtime.assigned and app.runtime.tables.ready, 10, message="ready")
        send_inputs(app, numbers, 0, 20)
        await wait_for(lambda: len(processed) >= 20, 10, message="20 processed")
        await app.runtime.checkpoint.commit()
    assert broker_of(app).committed.pop(name)  # the group's offsets, lost
    line = await restart(tmp_path, name, caplog)
    assert "standby" not in line and "the group has no committed offsets for its inputs" in line, line
