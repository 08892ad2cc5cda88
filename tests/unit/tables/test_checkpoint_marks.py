"""Checkpoint marks (tables/marks.py): under at-least-once, a table restored after a crash between
the changelog flush and the offset commit holds the committed state, so the records processed
again are counted once, not twice. The app is the plain Faust shape: a table, ``+=``, a send."""
from __future__ import annotations

import uuid
from types import SimpleNamespace

import orjson

from streamkit.tables.marks import MARK_HEADERS, MARK_KEY, OPENING_MARK, MarkedBlocks, committed_covers
from streamkit.tables.recovery import RecoveryProgress, replay
from streamkit.tables.stores import MemoryStore
from streamkit.testing import wait_for
from streamkit.transport import TP
from streamkit.transport.memory import MemoryBroker, MemoryDriver
from tests.unit.runtime.test_checkpoint_faults import broker_of, build, expected_sums, send_inputs

N = 300


async def crash_after_flush(app, numbers, sums, processed, upto):
    """Process inputs up to ``upto``, then a checkpoint that flushes the changelog (and its mark)
    but whose offset commit fails, as if the worker died right there; the stop commits nothing."""
    send_inputs(app, numbers, len(processed), upto)
    await wait_for(lambda: len(processed) >= upto, 10, message=f"{upto} inputs processed")
    broker_of(app).faults.fail_commits = 1_000_000
    try:
        await app.runtime.checkpoint.commit()
    except Exception:
        pass
    else:
        raise AssertionError("the injected commit failure did not fail the checkpoint")


async def test_at_least_once_a_crash_between_flush_and_commit_counts_nothing_twice(tmp_path):
    name = f"marks-{uuid.uuid4().hex[:6]}"
    app, numbers, sums, processed = build(tmp_path, "at_least_once", name=name, commit_interval=3600)
    async with app.running():
        await wait_for(lambda: app.runtime.assigned and app.runtime.tables.ready, 10, message="ready")
        send_inputs(app, numbers, 0, N // 2)
        await wait_for(lambda: len(processed) >= N // 2, 10, message="first half processed")
        await app.runtime.checkpoint.commit()  # the first half: changelog, mark, offsets
        await crash_after_flush(app, numbers, sums, processed, N)  # the second: changelog and mark only
        assert any(m.key == MARK_KEY for part in broker_of(app).logs[sums.changelog.name] for m in part)
    broker_of(app).faults.fail_commits = 0

    second, numbers2, sums2, processed2 = build(tmp_path, "at_least_once", name=name, commit_interval=3600)
    async with second.running():
        await wait_for(lambda: len(processed2) >= N // 2, 10, message="the uncommitted half processed again")
        assert {k: sums2[k] for k in expected_sums(N)} == expected_sums(N)  # not the second half twice
        assert second.runtime.tables.blocks_dropped >= 1
        await second.runtime.checkpoint.commit()  # writes the repaired keys with the new counts

    third, _, sums3, _ = build(tmp_path, "at_least_once", name=name, commit_interval=3600)
    async with third.running():  # restores every block, the dropped one included, from scratch
        await wait_for(lambda: third.runtime.assigned and third.runtime.tables.ready, 10, message="recovered")
        assert {k: sums3[k] for k in expected_sums(N)} == expected_sums(N)


def memory_driver() -> tuple[MemoryBroker, MemoryDriver]:
    name = f"marks-{uuid.uuid4().hex[:6]}"
    settings = SimpleNamespace(bootstrap_servers=name, auto_offset_reset="earliest", isolation_level="read_uncommitted")
    return MemoryBroker.named(name), MemoryDriver(settings)


def mark(offsets: dict) -> tuple[bytes, bytes, list]:
    return MARK_KEY, orjson.dumps(offsets), MARK_HEADERS


async def test_replay_applies_a_block_only_when_the_committed_offsets_reached_its_mark():
    """Opening mark, a committed block, an uncommitted one, a block no mark ended: only the
    first is applied; the keys of the others are left for the repair."""
    broker, driver = memory_driver()
    log = [(MARK_KEY, OPENING_MARK, MARK_HEADERS), (b"a", b"1", None), mark({"in": 10}), (b"a", b"2", None),
           (b"b", b"1", None),
           mark({"in": 20}), (b"c", b"1", None)]
    for key, value, headers in log:
        broker.append("t-changelog", key, value, 0, headers, None)
    store = MemoryStore()
    blocks = {TP("t-changelog", 0): MarkedBlocks(committed_covers({"in": 10}), marked=False)}
    await replay(driver, {TP("t-changelog", 0): store}, RecoveryProgress(), blocks=blocks)
    assert store.data == {b"a": b"1"}
    assert blocks[TP("t-changelog", 0)].dropped == {b"a", b"b", b"c"}
    assert orjson.loads(store.sources) == {"in": 10}
    assert store.offset == 5  # the dropped block's mark is passed over; the unmarked tail is read again


async def test_a_changelog_without_marks_is_restored_whole():
    """Changelogs written before marks existed (or by exactly-once) are applied as they come."""
    broker, driver = memory_driver()
    for key, value in ((b"a", b"1"), (b"b", b"2")):
        broker.append("t-changelog", key, value, 0, None, None)
    store = MemoryStore()
    blocks = {TP("t-changelog", 0): MarkedBlocks(committed_covers({}), marked=False)}
    await replay(driver, {TP("t-changelog", 0): store}, RecoveryProgress(), blocks=blocks)
    assert store.data == {b"a": b"1", b"b": b"2"} and not blocks[TP("t-changelog", 0)].dropped


async def test_a_standby_that_applied_an_uncommitted_checkpoint_is_restored_from_scratch_on_promotion(tmp_path, caplog):
    """b's standby copy of a's partitions takes a's last block (a standby cannot know whether its
    commit came); a dies before committing; when b takes over, its copy is ahead of the committed
    offsets, so it is emptied and restored, and every word is counted once."""
    from tests.unit.tables.test_tables_memory import build as build_words
    from tests.unit.tables.test_tables_memory import new_name, send_words, standbys_current

    name = new_name()
    a, words, counts_a, seen_a = build_words(name, tmp_path, "a", table_standby_replicas=1, commit_interval=3600)
    b, _, counts_b, seen_b = build_words(name, tmp_path, "b", table_standby_replicas=1, commit_interval=3600)
    broker = MemoryBroker.named(name)
    async with b.running():
        async with a.running():
            await wait_for(lambda: a.runtime.assigned and b.runtime.assigned, 10, message="both assigned")
            await send_words(words, 400, keys=40)
            await wait_for(lambda: len(seen_a) + len(seen_b) == 400, 10, message="400 words counted")
            await a.runtime.checkpoint.commit()
            await b.runtime.checkpoint.commit()
            await send_words(words, 400, keys=40)
            await wait_for(lambda: len(seen_a) + len(seen_b) == 800, 10, message="800 words counted")
            await b.runtime.checkpoint.commit()
            broker.faults.fail_commits = 1_000_000  # a's next checkpoint flushes, its commit fails: a "dies"
            try:
                await a.runtime.checkpoint.commit()
            except Exception:
                pass
            await wait_for(lambda: standbys_current(b, counts_b, 800), 10,
                           message="b's standby applied a's uncommitted block")
        broker.faults.fail_commits = 0
        await wait_for(lambda: len(counts_b) == 40 and b.runtime.tables.ready, 10, message="b serves every key")
        await wait_for(lambda: dict(counts_b.items()) == {f"w{i}": 20 for i in range(40)}, 10,
                       message="every word counted once after the takeover")
        assert b.runtime.tables.stores_reset >= 1
        assert any("(a standby applied a checkpoint that never committed)" in r.getMessage() for r in caplog.records)


def test_an_offset_gap_from_compaction_applies_what_is_held_instead_of_dropping_it():
    """Compaction removes superseded marks with the records: after a gap, where a block began is
    unknown, so what is held is applied (at worst a repeat), never dropped with a later mark."""
    from streamkit.transport.base import Message

    def record(offset, key, value, headers=None):
        return Message("t-changelog", 0, offset, key, value, headers, None)

    blocks = MarkedBlocks(committed_covers({"in": 10}), marked=True, after=3)
    batch: dict = {}
    for m in (record(4, b"a", b"1"), record(9, b"b", b"2"), record(10, MARK_KEY, b'{"in": 20}', MARK_HEADERS)):
        blocks.feed(m, batch)
    assert batch == {b"a": b"1"}  # held before the gap: applied; b is in the uncommitted block
    assert blocks.dropped == {b"b"}
