"""Changelog records nobody can read, and a tailer that fails: loud, supervised, nothing silent."""
from __future__ import annotations

import uuid

import streamkit as sk
from streamkit.runtime.dead_letters import HEADER_ERROR, HEADER_OFFSET, HEADER_STAGE
from streamkit.tables import recovery
from streamkit.testing import wait_for
from streamkit.transport import TP
from streamkit.transport.memory import MemoryBroker
from tests.helpers import word_counter


def build(name, tmp_path, tag, **settings):
    app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, store="memory://",
                 data_dir=str(tmp_path / tag), **settings)
    words, counts, seen = word_counter(app, partitions=2)
    return app, words, counts, seen


async def test_an_unreadable_changelog_record_goes_to_the_error_policy_with_table_and_offset(tmp_path):
    name = f"badlog-{uuid.uuid4().hex[:6]}"
    app, words, counts, seen = build(name, tmp_path, "a")
    async with app.running():
        await wait_for(lambda: app.runtime.assigned, 10)
        for key in ("a", "b", "c", "d"):
            await words.send(key=key, value="x")
        await wait_for(lambda: len(seen) == 4, 10)
        await app.runtime.checkpoint.commit()
    broker = MemoryBroker.named(name)
    changelog = f"{name}-counts-changelog"
    number = counts.partition_of(b"a")
    broker.append(changelog, b"a", b"{not json", None, None, number)  # written by something else
    bad_offset = len(broker.logs[changelog][number]) - 1
    again, _, counts2, _ = build(name, tmp_path, "b")
    async with again.running():
        await wait_for(lambda: again.runtime.tables is not None and again.runtime.tables.ready
                       and again.runtime.errors.counts["dlq"] == 1, 10, message="recovered, one dead letter")
        assert counts2["a"] == 1 and counts2["b"] == 1  # the readable value of "a" stays
    [letter] = [m for part in broker.logs[again.dlq_topic_name] for m in part]
    headers = dict(letter.headers)
    assert b"counts" in headers[HEADER_STAGE] and headers[HEADER_OFFSET] == str(bad_offset).encode()
    assert b"invalid JSON" in headers[HEADER_ERROR]


async def test_a_failing_tailer_is_reported_and_restarted(tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(recovery, "TAILER_BACKOFF", (0.05, 0.05))  # the restart's pause, not what is tested
    name = f"tailfail-{uuid.uuid4().hex[:6]}"
    app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, store="memory://",
                 data_dir=str(tmp_path))
    flags = app.GlobalTable("flags")
    async with app.running():
        tailer = app.runtime.tables.tailer
        await wait_for(lambda: tailer.stores, 10, message="the global table tailed")
        number = flags.partition_of(b"colour")
        store = tailer.stores[TP(f"{name}-flags-changelog", number)]
        original, broken = store.apply, [True]

        def disk_full(batch, offset, sources=None):
            if broken[0]:
                broken[0] = False
                raise OSError(28, "No space left on device")
            return original(batch, offset)

        store.apply = disk_full
        await app.send_raw(f"{name}-flags-changelog", b"colour", b'"blue"', partition=number)
        await wait_for(lambda: tailer.failures == 1, 10, message="the failure counted")
        assert "No space left" in str(tailer.last_error)
        [logged] = [r for r in caplog.records if "changelog tailer" in r.getMessage() and r.levelname == "ERROR"]
        assert "No space left" in logged.getMessage(), logged.getMessage()  # the cause, in the worker's log
        await wait_for(lambda: flags.get("colour") == "blue", 10, message="the restarted tailer applied it")
