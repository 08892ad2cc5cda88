"""``TestDriver`` and the pytest fixtures, on the Faust apps of tests/faust_apps as they are:
the driver points them at an in-memory broker and a virtual clock, and puts them back."""
from __future__ import annotations

import textwrap
from datetime import datetime, timezone
from pathlib import Path

from streamkit.testing import TestDriver, VirtualClock
from tests.faust_apps import scheduling, withdrawals, word_count

ROOT = Path(__file__).resolve().parents[3]


async def test_word_count_runs_on_the_driver_and_its_settings_come_back():
    broker_before = word_count.app.conf.broker
    async with TestDriver(word_count.app) as driver:
        for sentence in word_count.SENTENCES:
            await driver.send(word_count.posts_topic, value=sentence)
        await driver.settle()
        assert driver.table("word_counts")["the"] == 3 and driver.table("word_counts")["fox"] == 2
        words = driver.records(word_count.count_words.topic)
        assert sorted(r.value for r in words) == sorted(w for s in word_count.SENTENCES for w in s.split())
    assert word_count.app.conf.broker == broker_before and word_count.app.conf.driver != "memory"


async def test_windows_close_as_event_time_moves_and_settle_runs_the_checkpoint():
    start = datetime(2026, 1, 1, 10, 0, tzinfo=timezone.utc).timestamp()
    async with TestDriver(withdrawals.app, start=start) as driver:
        for minutes, amount in ((5, 10.0), (30, 5.0), (65, 1.0)):
            value = withdrawals.Withdrawal(user="u1", country="no", amount=amount,
                                           date=datetime.fromtimestamp(start + minutes * 60, timezone.utc))
            await driver.send(withdrawals.withdrawals_topic, key="u1", value=value)
        await driver.settle()
        totals = [(r.value.window_start, r.value.total) for r in driver.records(withdrawals.totals_topic)]
        assert totals == [(start, 10.0), (start, 15.0), (start + 3600, 1.0)]
        # hopping(2 h, 1 h): current() is the latest window holding the record, [11:00, 13:00) for 11:05
        assert [r.value for r in driver.records(withdrawals.country_totals_topic)] == [10.0, 15.0, 1.0]


async def test_timers_and_crontabs_fire_on_the_virtual_clock_without_waiting(capsys):
    async with TestDriver(scheduling.app) as driver:
        await driver.settle()
        capsys.readouterr()
        await driver.advance(10)
        out = capsys.readouterr().out.splitlines()
    assert out.count("TIMER tick") == 20 and out.count("LEADER TIMER tick") == 20
    assert out.count("CRONTAB fired") == 5  # "* * * * * */2": every 2 s of virtual time


async def test_virtual_clock_wakes_sleepers_in_order():
    clock = VirtualClock(100.0)
    woke: list[tuple[str, float]] = []

    async def sleeper(name, seconds):
        await clock.sleep(seconds)
        woke.append((name, clock.time()))

    import asyncio
    tasks = [asyncio.create_task(sleeper("b", 5)), asyncio.create_task(sleeper("a", 2))]
    await clock.advance(3)
    assert woke == [("a", 102.0)] and clock.time() == 103.0
    await clock.advance(10)
    assert woke == [("a", 102.0), ("b", 105.0)]
    await asyncio.gather(*tasks)


def test_the_pytest_fixtures_run_an_app_named_in_the_ini(pytester):
    pytester.makeini(textwrap.dedent(f"""
        [pytest]
        asyncio_mode = auto
        pythonpath = {ROOT}
        streamkit_app = tests.faust_apps.word_count:app
    """))
    pytester.makepyfile(test_counts=textwrap.dedent("""
        async def test_counts(test_driver, app):
            assert test_driver.app is app
            await test_driver.send("posts", value="a b a")
            await test_driver.settle()
            assert test_driver.table("word_counts")["a"] == 2
    """))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=1)


def test_the_app_fixture_says_how_to_name_the_app(pytester):
    pytester.makeini("[pytest]\nasyncio_mode = auto\n")
    pytester.makepyfile(test_nothing="def test_it(app):\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*streamkit_app*module:attribute*"])
