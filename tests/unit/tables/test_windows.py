# ruff: noqa: SLF001 - white-box: this file reads or drives internals on purpose
"""Windowed tables as a Faust user writes them: ``app.Table(..., default=int).tumbling(10)`` and
``views[key] += 1`` in an agent; windows close by stream time, final values are emitted once,
late records are counted and never merged, old windows are deleted."""
from __future__ import annotations

import uuid
from datetime import datetime, timezone

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import streamkit as sk
from streamkit.errors import ConfigurationError
from streamkit.testing import VirtualClock, wait_for
from streamkit.transport.memory import MemoryBroker


def windowed_app(name, window, *, partitions=1, **app_settings):
    """The app under test: counts per key in ``window(table)``; returns what the test reads."""
    closed: list = []
    app = sk.App(name, broker=f"memory://{name}", driver="memory", store="memory://",
                 **{"web_enabled": False, **app_settings})
    clicks = app.topic("clicks", key_type=str, value_type=str, partitions=partitions)
    finals = app.topic("finals", partitions=partitions)
    views = window(app.Table("views", default=int, on_window_close=lambda key, value: closed.append((key, value))))
    views = views.final(finals)
    seen: list = []

    @app.agent(clicks)
    async def count(stream):
        async for event in stream.events():
            views[event.key] += 1
            seen.append((event.key, views[event.key].current()))

    return app, clicks, views, seen, closed


def final_records(app):
    broker = MemoryBroker.named(app.conf.bootstrap_servers)
    return [(m.key.decode(), orjson.loads(m.value)) for part in broker.logs.get("finals", []) for m in part
            if m.value is not None]


async def send_at(topic, key, seconds):
    await topic.send(key=key, value="x", timestamp=seconds)


async def counted(app, clicks, seen, times):
    """Once the app is ready, send key "a" at each of ``times`` (seconds; or ``(key, seconds)``
    pairs), and wait until every one was counted."""
    await wait_for(lambda: app.runtime.assigned and app.runtime.tables.ready, 10, message="ready")
    total = len(seen) + len(times)
    for t in times:
        key, t = t if isinstance(t, tuple) else ("a", t)
        await send_at(clicks, key, t)
    await wait_for(lambda: len(seen) == total, 10, message=f"{total} records counted")


async def test_tumbling_windows_close_by_stream_time_and_emit_each_final_value_once():
    app, clicks, views, seen, closed = windowed_app(f"win-{uuid.uuid4().hex[:6]}", lambda t: t.tumbling(10))
    async with app.running():
        await counted(app, clicks, seen, (1001, 1002, 1005, 1011))  # the fourth record moves stream time past 1010
        assert [value for _, value in seen] == [1, 2, 3, 1]
        assert closed == [] and final_records(app) == []  # emitted at the checkpoint, with its offsets
        await app.runtime.checkpoint.commit()
        await wait_for(lambda: closed, 10, message="on_window_close called after the commit")
        assert closed == [(("a", (1000.0, 1010.0)), 3)]
        assert final_records(app) == [("a", {"start": 1000.0, "end": 1010.0, "value": 3})]
        await send_at(clicks, "a", 1012)  # a later record: proves the next checkpoint ran after it
        await wait_for(lambda: len(seen) == 5, 10, message="the fifth record counted")
        await app.runtime.checkpoint.commit()
        await app.runtime.tables._callbacks_running  # the second checkpoint's callbacks, if any, ran
        assert len(final_records(app)) == 1 and len(closed) == 1, "a closed window was emitted twice"
        assert list(views["a"]) == [((1010.0, 1020.0), 2)]  # the closed window expired (expires = size)


async def test_a_late_record_is_counted_and_never_merged_into_a_closed_window():
    app, clicks, views, seen, closed = windowed_app(f"win-{uuid.uuid4().hex[:6]}",
                                                    lambda t: t.tumbling(10, grace=2))
    async with app.running():
        await wait_for(lambda: app.runtime.assigned and app.runtime.tables.ready, 10, message="ready")
        for t in (1001, 1011, 1003):  # 1003 is within grace: 1010 + 2 > 1011
            await send_at(clicks, "a", t)
        for t in (1013, 1004):  # stream time 1013 closes [1000, 1010): 1004 is late
            await send_at(clicks, "a", t)
        await wait_for(lambda: len(seen) == 5, 10, message="five records processed")
        await app.runtime.checkpoint.commit()
        assert views.late_records == 1
        assert final_records(app) == [("a", {"start": 1000.0, "end": 1010.0, "value": 2})]
        from streamkit.web.metrics import Metrics

        body = Metrics(app).render()[0].decode()
        assert f'streamkit_window_late_records_total{{app="{app.id}",table="views"}} 1.0' in body
        assert f'streamkit_windows_closed_total{{app="{app.id}",table="views"}} 1.0' in body


async def test_hopping_windows_count_a_record_in_each_window_it_falls_in():
    app, clicks, views, seen, closed = windowed_app(f"win-{uuid.uuid4().hex[:6]}", lambda t: t.hopping(10, 5))
    async with app.running():
        await counted(app, clicks, seen, (1001, 1006, 1030))
        await app.runtime.checkpoint.commit()
        finals = sorted((v["start"], v["value"]) for _, v in final_records(app))
        assert finals == [(995.0, 1), (1000.0, 2), (1005.0, 1)]


async def test_expired_windows_are_deleted_so_the_store_stays_bounded():
    app, clicks, views, seen, closed = windowed_app(f"win-{uuid.uuid4().hex[:6]}",
                                                    lambda t: t.tumbling(10, expires=30))
    async with app.running():
        await wait_for(lambda: app.runtime.assigned and app.runtime.tables.ready, 10, message="ready")
        for i in range(60):  # 60 windows of one key over 600 s
            await send_at(clicks, "a", 1000 + 10 * i + 1)
            if i % 10 == 9:
                await wait_for(lambda: len(seen) == i + 1, 10, message="records counted")  # noqa: B023 - called within this same iteration
                await app.runtime.checkpoint.commit()
        table = app.tables["views"]
        stored = [k for part in table.local.values() for k, _ in part.store.items()]
        assert 1 < len(stored) <= 4 + 1, stored  # 10 s windows kept 30 s after their end (+ the stream-time entry)
        assert len(final_records(app)) == 59


async def test_expires_is_counted_from_the_windows_end_as_in_faust():
    """Faust's windowed_aggregation.py: 10 s windows, expires=1 s (refused when it was counted from the start)."""
    app, clicks, views, seen, closed = windowed_app(f"win-{uuid.uuid4().hex[:6]}", lambda t: t.tumbling(10, expires=1))
    async with app.running():
        await counted(app, clicks, seen, (1001, 1002, 1010.5))  # [1000, 1010) closes; kept until 1011
        await app.runtime.checkpoint.commit()
        await wait_for(lambda: closed, 10, message="the window's final value")
        assert list(views["a"]) == [((1000.0, 1010.0), 2), ((1010.0, 1020.0), 1)]
        await counted(app, clicks, seen, (1011,))
        await app.runtime.checkpoint.commit()
        assert list(views["a"]) == [((1010.0, 1020.0), 2)]
    assert closed == [(("a", (1000.0, 1010.0)), 2)]


async def test_recovery_restores_the_windows_and_the_stream_time(tmp_path):
    name = f"win-{uuid.uuid4().hex[:6]}"
    first = windowed_app(name, lambda t: t.tumbling(10))
    app, clicks, views, seen, _ = first
    async with app.running():
        await counted(app, clicks, seen, (1001, 1002, 1021))  # closes [1000, 1010); [1020, 1030) holds 1
    app, clicks, views, seen, closed = windowed_app(name, lambda t: t.tumbling(10))  # a new worker
    async with app.running():
        await wait_for(lambda: app.runtime.assigned and app.runtime.tables.ready, 10, message="recovered")
        for t in (1005, 1022):  # 1005 is late for the recovered stream time (1021)
            await send_at(clicks, "a", t)
        await wait_for(lambda: len(seen) == 2, 10, message="two records counted")
        assert views.late_records == 1
        assert seen[-1] == ("a", 2)  # the recovered window kept counting


class Click(sk.Record):
    user: str
    at: datetime


class Tick(sk.Record):
    user: str
    at: float  # epoch seconds


async def counts_per_minute(record: type, times: list) -> list:
    """Each record's count in its minute, with ``times`` in the ``at`` field of ``record`` (a
    datetime or epoch seconds): a tumbling window relative_to_field, one key."""
    name = f"win-{uuid.uuid4().hex[:6]}"
    app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, store="memory://")
    clicks = app.topic("clicks", key_type=str, value_type=record, partitions=1)
    views = app.Table("views", default=int).tumbling(60).relative_to_field(record.at)
    seen: list = []

    @app.agent(clicks)
    async def count(stream):
        async for click in stream:
            views[click.user] += 1
            seen.append(views[click.user].current())

    async with app.running():
        await wait_for(lambda: app.runtime.assigned and app.runtime.tables.ready, 10, message="ready")
        for at in times:
            await clicks.send(key="u", value=record("u", at))
        await wait_for(lambda: len(seen) == len(times), 10, message="every click counted")
    return seen


async def test_relative_to_field_reads_the_time_from_the_value():
    base = datetime(2026, 1, 1, tzinfo=timezone.utc)
    seen = await counts_per_minute(Click, [base.replace(minute=m, second=s) for m, s in ((0, 1), (0, 59), (1, 0))])
    assert seen == [1, 2, 1]  # the record timestamps (now) play no part


async def test_a_time_just_before_a_window_end_falls_in_that_window():
    """An event at 59.9996 s is in the minute [0, 60), as Faust's float windows and Kafka's
    truncated milliseconds place it; rounded to the nearest ms it went into the next minute
    (the benchmarks' window finals were one short, once per user whose times end in .9995)."""
    base = 1_795_960_140.0  # a minute's start, in epoch seconds
    seen = await counts_per_minute(Tick, [base + 0.0005, base + 59.9995556, base + 59.999999, base + 60.0])
    assert seen == [1, 2, 3, 1], seen  # 0.44 ms and 1 µs before the minute's end: still in it


def test_event_times_are_the_millisecond_they_fall_in():
    """Seconds (float, int) and datetimes to epoch ms: truncated, not rounded up; a whole number
    of ms divided by 1000 comes back as itself (Faust's ``message.timestamp`` sent on)."""
    from streamkit.event_time import epoch_ms

    assert epoch_ms(1_795_960_199.9995556) == 1_795_960_199_999
    assert epoch_ms(59.9996) == 59_999 and epoch_ms(60) == 60_000 and epoch_ms(0.0005) == 0
    assert epoch_ms(-0.0005) == -1  # before 1970: the millisecond it falls in, as floor does
    for ms in range(1_795_960_199_000, 1_795_960_201_000):  # every ms around a minute, as a float
        assert epoch_ms(ms / 1000) == ms, ms
    moment = datetime(2026, 11, 29, 13, 49, 59, 999_600, tzinfo=timezone.utc)
    assert epoch_ms(moment) == int(moment.replace(microsecond=999_000).timestamp()) * 1000 + 999
    assert epoch_ms(moment.replace(microsecond=999_999)) % 1000 == 999
    assert epoch_ms(datetime(1970, 1, 1, tzinfo=timezone.utc)) == 0


async def test_on_window_close_without_a_window_is_refused_at_start():
    name = f"win-{uuid.uuid4().hex[:6]}"
    app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, store="memory://")
    app.topic("clicks", partitions=1)
    app.Table("views", default=int, on_window_close=print)

    @app.agent(app.topic("clicks", partitions=1))
    async def count(stream):
        async for _ in stream:
            pass

    with pytest.raises(ConfigurationError, match="on_window_close but no window"):
        async with app.running():
            pass


def test_window_settings_that_cannot_work_are_refused():
    app = sk.App("w", broker="memory://w", driver="memory")
    with pytest.raises(ConfigurationError, match="shorter than grace"):
        app.Table("a").tumbling(10, expires=5, grace=10)
    with pytest.raises(ConfigurationError, match="longer than the window"):
        app.Table("b").hopping(10, 20)
    with pytest.raises(ConfigurationError, match="shorter than size \\+ grace"):
        app.Table("c").sliding(10, expires=5)


# -- against a batch recomputation --------------------------------------------------------------

def batch_truth(records, size, step, grace):
    """Each window's final count and the late records, computed over the whole input at once:
    a record counts in window w iff, when it arrived, the largest timestamp seen so far (itself
    included) was below w's end + grace."""
    finals: dict = {}
    late = set()
    high = None
    for i, (key, ts) in enumerate(records):
        high = ts if high is None else max(high, ts)
        first = ((ts - size) // step + 1) * step
        for start in range(first, ts + 1, step):
            if start + size + grace <= high:
                late.add(i)
            else:
                finals[(key, start)] = finals.get((key, start), 0) + 1
    closed = {w: n for w, n in finals.items() if w[1] + size + grace <= high}
    return closed, len(late)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(records=[("a", 0), ("a", 10), ("b", 0)], shape=(10, 10), grace=0, keep=0)  # both boundaries
@example(records=[("a", 12), ("a", 0), ("a", 9), ("b", 30)], shape=(10, 5), grace=3, keep=0)
@given(records=st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 40)), min_size=1, max_size=30),
       shape=st.sampled_from([(10, 10), (10, 5), (20, 5), (6, 3)]), grace=st.sampled_from([0, 3, 15]),
       keep=st.sampled_from([0, 7, 100]))
async def test_final_values_and_late_records_match_a_batch_recomputation(records, shape, grace, keep):
    """``keep``: how much longer than grace windows are kept after their end (expires): never a
    final value's business."""
    size, step = shape
    expires = grace + keep
    app, clicks, views, seen, closed = windowed_app(
        f"winp-{uuid.uuid4().hex[:6]}", lambda t: t.hopping(size, step, expires, grace=grace) if step != size
        else t.tumbling(size, expires, grace=grace))
    async with app.running():
        await counted(app, clicks, seen, [(key, 1000 + ts) for key, ts in records])
        await app.runtime.checkpoint.commit()
        emitted = {(k, round(v["start"] * 1000)): v["value"] for k, v in final_records(app)}
        truth, late = batch_truth([(k, (1000 + ts) * 1000) for k, ts in records], size * 1000, step * 1000,
                                  grace * 1000)
        assert emitted == truth
        assert views.late_records == late


async def test_exactly_once_a_rolled_back_checkpoint_emits_each_final_value_once():
    """The window's final record, its deletion and the offsets that closed it share one
    transaction: when that transaction fails, the records are processed again and the window is
    emitted by the next one, so a read_committed reader sees it once."""
    from tests.unit.runtime.test_exactly_once_memory import committed_values

    app, clicks, views, seen, closed = windowed_app(f"win-{uuid.uuid4().hex[:6]}", lambda t: t.tumbling(10),
                                                    processing_guarantee="exactly_once", commit_interval=25)
    broker = MemoryBroker.named(app.conf.bootstrap_servers)
    producer = app.driver.producer()  # the input, written outside the app's transactions
    await producer.start()
    for t in (1001, 1002, 1011):
        await producer.send("clicks", b"a", b"\"x\"", timestamp=t * 1000)
    await producer.flush()
    async with app.running():
        await wait_for(lambda: len(seen) == 3, 10, message="three records counted")
        broker.faults.fail_txn_commits = 1
        with pytest.raises(Exception):  # noqa: B017 - any failure: the reprocessing after it is under test
            await app.runtime.checkpoint.commit()
        await wait_for(lambda: len(seen) == 6, 10, message="the three records processed again")
        await app.runtime.checkpoint.commit()
        finals = [orjson.loads(m.value) for m in committed_values(app, "finals")]
        assert finals == [{"start": 1000.0, "end": 1010.0, "value": 2}]
        assert seen[3:] == [("a", 1), ("a", 2), ("a", 1)]  # counted from the committed state again


async def test_the_web_view_of_a_windowed_table_lists_its_windows_and_picks_one_by_time():
    import aiohttp

    from streamkit.devbroker import free_port

    port = free_port()
    app, clicks, views, seen, closed = windowed_app(f"win-{uuid.uuid4().hex[:6]}", lambda t: t.tumbling(10, expires=60),
                                                    partitions=2, web_enabled=True, web_port=port)
    base = f"http://127.0.0.1:{port}"

    async def get(session, path):
        async with session.get(base + path) as resp:
            return resp.status, await resp.json(content_type=None)

    async with app.running(), aiohttp.ClientSession() as session:
        await counted(app, clicks, seen, (1001, 1002, 1011))
        status, body = await get(session, "/tables/views/a")
        assert status == 200 and body == {"key": "a", "windows": [{"start": 1000.0, "end": 1010.0, "value": 2},
                                                                  {"start": 1010.0, "end": 1020.0, "value": 1}]}
        assert (await get(session, "/tables/views/a?at=1011500"))[1]["windows"] == [
            {"start": 1010.0, "end": 1020.0, "value": 1}]
        assert (await get(session, "/tables/views/a?at=900000"))[0] == 404
        assert (await get(session, "/tables/views/a?at=soon"))[0] == 400


async def test_close_idle_after_moves_an_idle_partitions_stream_time_with_the_wall_clock():
    app, clicks, views, seen, closed = windowed_app(f"win-{uuid.uuid4().hex[:6]}",
                                                    lambda t: t.tumbling(10, close_idle_after=5))
    app.clock = clock = VirtualClock(5000.0)  # the app's clock: idle time is measured on it
    async with app.running():
        await wait_for(lambda: app.runtime.assigned and app.runtime.tables.ready, 10, message="ready")
        await send_at(clicks, "a", 1001)
        await wait_for(lambda: len(seen) == 1, 10, message="one record counted")
        await clock.advance(9)  # idle 9 s: 4 s past close_idle_after, stream time 1001 + 4 < 1010
        await app.runtime.checkpoint.commit()
        assert closed == [] and final_records(app) == []
        await clock.advance(6)  # idle 15 s: stream time 1001 + 10 = 1011 closes [1000, 1010)
        await app.runtime.checkpoint.commit()
        assert final_records(app) == [("a", {"start": 1000.0, "end": 1010.0, "value": 1})]
        await send_at(clicks, "a", 1005)  # behind the moved stream time: late
        await wait_for(lambda: len(seen) == 2, 10, message="the late record processed")
        assert views.late_records == 1


async def test_without_close_idle_after_an_idle_partition_keeps_its_windows_open():
    app, clicks, views, seen, closed = windowed_app(f"win-{uuid.uuid4().hex[:6]}", lambda t: t.tumbling(10))
    app.clock = clock = VirtualClock(5000.0)
    async with app.running():
        await wait_for(lambda: app.runtime.assigned and app.runtime.tables.ready, 10, message="ready")
        await send_at(clicks, "a", 1001)
        await wait_for(lambda: len(seen) == 1, 10, message="one record counted")
        await clock.advance(3600)
        await app.runtime.checkpoint.commit()
        assert final_records(app) == [] and list(views["a"]) == [((1000.0, 1010.0), 1)]


async def test_late_records_go_to_the_dead_letter_topic_with_the_reason_when_asked():
    app, clicks, views, seen, closed = windowed_app(f"win-{uuid.uuid4().hex[:6]}",
                                                    lambda t: t.tumbling(10, late="dead-letter"))
    async with app.running():
        await counted(app, clicks, seen, (1001, 1011, 1004))
        await app.runtime.checkpoint.commit()
        broker = MemoryBroker.named(app.conf.bootstrap_servers)
        letters = [m for part in broker.logs.get(app.dlq_topic_name, []) for m in part if m.value is not None]
        assert len(letters) == 1 and letters[0].key == b"a"
        headers = dict(letters[0].headers)
        assert headers["streamkit-stage"] == b"window" and b"closed window(s) [1000, 1010)" in headers[
            "streamkit-error"]
        assert headers["streamkit-source-offset"] == b"2" and views.late_records == 1
    with pytest.raises(ConfigurationError, match="late='keep'"):
        app.Table("other").tumbling(10, late="keep")


# -- session windows ----------------------------------------------------------------------------

async def test_a_record_that_bridges_two_open_sessions_merges_them():
    app, clicks, views, seen, closed = windowed_app(f"win-{uuid.uuid4().hex[:6]}",
                                                    lambda t: t.session(5, grace=10))
    async with app.running():
        await counted(app, clicks, seen, (1000, 1003, 1010))  # two sessions: [1000, 1003] and [1010, 1010]
        assert [s for s, _ in views["a"]] == [(1000.0, 1003.0), (1010.0, 1010.0)]
        await send_at(clicks, "a", 1007)  # within 5 s of both: one session [1000, 1010] of 4
        await send_at(clicks, "a", 1040)  # stream time 1040 >= 1010 + 5 + 10 closes it
        await wait_for(lambda: len(seen) == 5, 10, message="five records counted")
        assert seen[3] == ("a", 4)
        await app.runtime.checkpoint.commit()
        assert final_records(app) == [("a", {"start": 1000.0, "end": 1010.0, "value": 4})]
        await wait_for(lambda: closed, 10, message="on_window_close called after the commit")
        assert closed == [(("a", (1000.0, 1010.0)), 4)]


async def run_sessions(records, gap, grace):
    """Records ``(key, seconds after 1000)`` through a session table: the sessions it emitted,
    ``{(key, start, end): count}`` in seconds after 1000, and its late-record count."""
    app, clicks, views, seen, closed = windowed_app(f"wins-{uuid.uuid4().hex[:6]}",
                                                    lambda t: t.session(gap, grace=grace))
    async with app.running():
        await counted(app, clicks, seen, [(key, 1000 + ts) for key, ts in records])
        await app.runtime.checkpoint.commit()
        emitted = {(k, round(v["start"]) - 1000, round(v["end"]) - 1000): v["value"] for k, v in final_records(app)}
        return emitted, views.late_records


def session_truth(records, gap, grace):
    """Sessions over the whole input at once: each key's timestamps sorted and cut where two
    neighbours are more than ``gap`` apart; those that must have closed by the end."""
    high = max(ts for _, ts in records)
    truth = {}
    for key in {k for k, _ in records}:
        stamps = sorted(ts for k, ts in records if k == key)
        first = last = stamps[0]
        count = 0
        for ts in stamps:
            if ts - last > gap:
                truth[(key, first, last)] = count
                first, count = ts, 0
            last = ts
            count += 1
        truth[(key, first, last)] = count
    return {w: n for w, n in truth.items() if w[2] + gap + grace < high}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(records=[("a", 0), ("a", 5), ("a", 2), ("a", 30)], jitter=[0, 0, 4, 0], gap=3)
@given(records=st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 50)), min_size=1, max_size=25),
       jitter=st.lists(st.integers(0, 4), min_size=25, max_size=25), gap=st.sampled_from([1, 3, 5]))
async def test_sessions_match_a_batch_recomputation_when_disorder_stays_within_grace(records, jitter, gap):
    """Records arrive up to 4 s out of order; with grace 5 none is late and every session's final
    value is the count of its cluster of timestamps."""
    grace = 5
    arrived_at = [ts + j for (_, ts), j in zip(records, jitter, strict=False)]  # jitter is the longer
    arrival = [r for _, r in sorted(zip(arrived_at, records, strict=True), key=lambda pair: pair[0])]
    emitted, late = await run_sessions(arrival, gap, grace)
    assert emitted == session_truth(arrival, gap, grace)
    assert late == 0


# -- sliding windows ----------------------------------------------------------------------------

# -- sliding windows ----------------------------------------------------------------------------

async def test_sliding_windows_are_the_distinct_record_sets_within_size_as_in_kafka_streams():
    """Kafka Streams' SlidingWindows, size 10 s, grace 0: the window ending at each record, and the
    one starting 1 ms after each record with a successor within size; ``current()`` counts the
    last 10 s. 1003 arrives after 1008: its own window [993, 1003] has closed, so it is late."""
    app, clicks, views, seen, closed = windowed_app(f"wins-{uuid.uuid4().hex[:6]}", lambda t: t.sliding(10))
    async with app.running():
        await counted(app, clicks, seen, (1000, 1008, 1003, 1020, 1040))
        await app.runtime.checkpoint.commit()
        finals = sorted((v["start"], v["end"], v["value"]) for _, v in final_records(app))
        assert finals == [(990.0, 1000.0, 1), (998.0, 1008.0, 2), (1000.001, 1010.001, 1), (1010.0, 1020.0, 1)]
        assert views.late_records == 1
        assert [v for _, v in seen] == [1, 2, 1, 1, 1]  # at 1003 (late, not counted): only 1000 is within 10 s


async def test_sliding_windows_start_from_a_window_holding_the_same_records_so_any_aggregate_works():
    """Out of order within grace: each new window starts from a stored window that held exactly
    its records, so an order-sensitive aggregate (a list in arrival order) comes out as if
    recomputed from the records."""
    name = f"wins-{uuid.uuid4().hex[:6]}"
    app = sk.App(name, broker=f"memory://{name}", driver="memory", store="memory://", web_enabled=False)
    clicks = app.topic("clicks", key_type=str, value_type=str)
    finals = app.topic("finals")
    seen: list = []
    names = app.Table("names", default=list).sliding(10, grace=30).final(finals)

    @app.agent(clicks)
    async def collect(stream):
        async for event in stream.events():
            names[event.key] += [event.value]
            seen.append(names[event.key].current())

    async with app.running():
        await wait_for(lambda: app.runtime.assigned and app.runtime.tables.ready, 10, message="ready")
        for value, ts in (("p", 1000), ("q", 1012), ("r", 1005), ("s", 1011), ("end", 1100)):
            await clicks.send(key="a", value=value, timestamp=ts)
        await wait_for(lambda: len(seen) == 5, 10, message="five records")
        await app.runtime.checkpoint.commit()
        assert seen == [["p"], ["q"], ["p", "r"], ["r", "s"], ["end"]]
        assert sorted((v["start"], v["end"], v["value"]) for _, v in final_records(app)) == [
            (990.0, 1000.0, ["p"]), (995.0, 1005.0, ["p", "r"]), (1000.001, 1010.001, ["r"]),
            (1001.0, 1011.0, ["r", "s"]), (1002.0, 1012.0, ["q", "r", "s"]), (1005.001, 1015.001, ["q", "s"]),
            (1011.001, 1021.001, ["q"])]


async def test_a_recovered_sliding_table_knows_its_record_times_again():
    """Which windows end at a record is in the store key, so a new worker adds the right windows
    for out-of-order records after a recovery."""
    name = f"wins-{uuid.uuid4().hex[:6]}"
    app, clicks, views, seen, _ = windowed_app(name, lambda t: t.sliding(10, grace=30))
    async with app.running():
        await counted(app, clicks, seen, (1000, 1012))
    app, clicks, views, seen, _ = windowed_app(name, lambda t: t.sliding(10, grace=30))  # a new worker
    async with app.running():
        await wait_for(lambda: app.runtime.assigned and app.runtime.tables.ready, 10, message="recovered")
        await counted(app, clicks, seen, (1005, 1011, 1100))
        await app.runtime.checkpoint.commit()
        truth, _ = sliding_truth([("a", t * 1000) for t in (1000, 1012, 1005, 1011, 1100)], 10_000, 30_000)
        assert {("a", round(v["start"] * 1000)): v["value"] for _, v in final_records(app)} == truth


def sliding_truth(records, size, grace):
    """Kafka Streams' sliding windows over the whole input at once (ms): a record is late when,
    on arrival, its window [t - size, t] had closed (t + grace behind the largest time so far);
    the others make the window ending at each and the one starting 1 ms after each that has a
    successor within size; each closed window's count is its records'."""
    high, kept, late = None, {}, 0
    for key, ts in records:
        high = ts if high is None else max(high, ts)
        if ts + grace < high:
            late += 1
        else:
            kept.setdefault(key, []).append(ts)
    truth = {}
    for key, stamps in kept.items():
        starts = {t - size for t in stamps} | {t + 1 for t in stamps if any(t < u <= t + 1 + size for u in stamps)}
        for start in starts:
            if start + size + grace + 1 <= high:
                truth[(key, start)] = sum(start <= u <= start + size for u in stamps)
    return truth, late


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(records=[("a", 0), ("a", 8), ("a", 3), ("a", 20), ("a", 40)], size=10, grace=0)
@example(records=[("a", 0), ("a", 12), ("a", 5), ("a", 11), ("a", 10), ("a", 1), ("a", 60)], size=10, grace=30)
# a right window ends at a record:
@example(records=[("a", 0), ("a", 10), ("a", 21), ("a", 11), ("a", 60)], size=10, grace=15)
@given(records=st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 60)), min_size=1, max_size=30),
       size=st.sampled_from([1, 5, 10, 25]), grace=st.sampled_from([0, 3, 15, 60]))
async def test_sliding_windows_match_a_batch_recomputation(records, size, grace):
    app, clicks, views, seen, closed = windowed_app(f"winsl-{uuid.uuid4().hex[:6]}",
                                                    lambda t: t.sliding(size, grace=grace))
    async with app.running():
        await counted(app, clicks, seen, [(key, 1000 + ts) for key, ts in records])
        await app.runtime.checkpoint.commit()
        emitted = [(k, round(v["start"] * 1000)) for k, v in final_records(app)]
        assert len(emitted) == len(set(emitted)), "a window emitted twice"
        truth, late = sliding_truth([(k, (1000 + ts) * 1000) for k, ts in records], size * 1000, grace * 1000)
        assert {(k, round(v["start"] * 1000)): v["value"] for k, v in final_records(app)} == truth
        assert views.late_records == late


def session_simulation(records, gap, grace):
    """Sessions record by record, the plain way (a list per key, scanned in full): a record joins
    or bridges the open sessions within gap of it; it is late when the session it would make
    ends before the stream time minus gap minus grace; a session closes once the stream time
    passes its end + gap + grace (a record at end + gap still extends it). Returns the closed
    sessions' counts and the late count."""
    high, late = None, 0
    sessions: dict[str, list[list[int]]] = {}  # key -> [start, end, count, closed]
    for key, ts in records:
        high = ts if high is None else max(high, ts)
        for spans in sessions.values():
            for span in spans:
                span[3] = span[3] or span[1] + gap + grace < high
        spans = sessions.setdefault(key, [])
        touching = [s for s in spans if not s[3] and s[0] - gap <= ts <= s[1] + gap]
        start, end = min([ts, *(s[0] for s in touching)]), max([ts, *(s[1] for s in touching)])
        if end + gap + grace < high:
            late += 1
            continue
        for s in touching:
            spans.remove(s)
        spans.append([start, end, 1 + sum(s[2] for s in touching), False])
    closed = {(key, s[0], s[1]): s[2] for key, spans in sessions.items() for s in spans if s[1] + gap + grace < high}
    return closed, late


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(records=[("a", 10), ("a", 30), ("a", 12), ("a", 0)], gap=3, grace=2)  # 12 joins; 0 is late
@example(records=[("a", 0), ("a", 5)], gap=5, grace=0)  # at end + gap: extends, whatever moved the stream time
@example(records=[("a", 0), ("b", 5), ("a", 5)], gap=5, grace=0)
@given(records=st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 50)), min_size=1, max_size=25),
       gap=st.sampled_from([1, 3, 5]), grace=st.sampled_from([0, 2, 10]))
async def test_sessions_with_late_records_match_a_record_by_record_simulation(records, gap, grace):
    """Any disorder, so records come late too: the indexed sessions (open ones per key, close
    times in a heap) agree with a plain scan of every session on every record."""
    emitted, late = await run_sessions(records, gap, grace)
    assert (emitted, late) == session_simulation(records, gap, grace)


async def test_on_window_close_may_send_even_under_exactly_once():
    """A Faust app's callback sends the closed window on; the send must not wait for the commit
    that waits for the callback."""
    name = f"win-{uuid.uuid4().hex[:6]}"
    app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, store="memory://",
                 processing_guarantee="exactly_once", commit_interval=0.1)
    clicks = app.topic("clicks", key_type=str, value_type=str, partitions=1)
    alerts = app.topic("alerts", key_type=str, value_type=int, partitions=1)

    async def alert(key, value):
        await alerts.send(key=key[0], value=value)

    views = app.Table("views", default=int, on_window_close=alert).tumbling(10)
    seen: list = []

    @app.agent(clicks)
    async def count(stream):
        async for event in stream.events():
            views[event.key] += 1
            seen.append(event.key)

    async with app.running():
        await counted(app, clicks, seen, (1001, 1002, 1011))
        from tests.unit.runtime.test_exactly_once_memory import committed_values

        await wait_for(lambda: [m.value for m in committed_values(app, "alerts")] == [b"2"], 10,
                       message="the callback's send committed")
