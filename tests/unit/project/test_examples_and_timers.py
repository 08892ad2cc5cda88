import asyncio
import datetime as dt
import importlib.util
import uuid
from pathlib import Path

import orjson
import pytest

import streamkit as sk
from streamkit.testing import VirtualClock, wait_for
from streamkit.timers import Timer

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def load_example(name, monkeypatch, tmp_path):
    broker = f"memory://{name}-{uuid.uuid4().hex[:6]}"
    monkeypatch.setenv("STREAMKIT_DRIVER", "memory")
    monkeypatch.setenv("STREAMKIT_BROKER", broker)
    monkeypatch.setenv("STREAMKIT_COMMIT_INTERVAL", "0.05")
    monkeypatch.setenv("STREAMKIT_WEB_ENABLED", "false")
    monkeypatch.setenv("STREAMKIT_DATA_DIR", str(tmp_path))
    spec = importlib.util.spec_from_file_location(f"example_{name}_{uuid.uuid4().hex[:6]}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_orders_example_group_by_and_ask(monkeypatch, tmp_path):
    ex = load_example("orders", monkeypatch, tmp_path)
    async with ex.app.running():
        for i in range(30):
            await ex.orders.send(key=f"o{i}", value=ex.Order(f"o{i}", f"user{i % 3}", 1.5))
        await wait_for(lambda: sum(ex.totals.values()) == 45.0, 10, message="all orders summed")
        assert await ex.user_total.ask("user1", timeout=5) == 15.0
        assert await ex.user_total.ask("nobody", timeout=5) == 0.0


async def test_wordcount_example_counts_every_word(monkeypatch, tmp_path):
    ex = load_example("wordcount", monkeypatch, tmp_path)
    text = (EXAMPLES / "sample.txt").read_text().splitlines()
    async with ex.app.running():
        for line in text:
            await ex.sentences.send(value=line)
        await wait_for(lambda: ex.app.runtime.tables.ready and ex.app.runtime.rebalances, 10)
        await wait_for(lambda: sum(ex.counts.values()) == ex.total(str(EXAMPLES / "sample.txt")), 10)
        assert ex.counts["the"] == 5 and ex.counts["stream"] == 3


async def test_crontab_fires_on_schedule_in_its_timezone_and_survives_errors():
    start = dt.datetime(2026, 3, 1, 11, 58, 30, tzinfo=dt.timezone.utc).timestamp()
    clock = VirtualClock(start)
    fired: list[str] = []

    async def job():
        fired.append(dt.datetime.fromtimestamp(clock.now, dt.timezone.utc).strftime("%H:%M"))
        if len(fired) == 1:
            raise RuntimeError("first run fails")

    timer = Timer(job, cron="*/5 * * * *", timezone="Europe/Paris")
    task = asyncio.create_task(timer.run(clock, lambda: True))
    await clock.advance_to(start + 16 * 60)
    task.cancel()
    assert fired == ["12:00", "12:05", "12:10"]
    assert timer.failures == 1 and timer.runs == 2


async def test_interval_timer_does_not_drift_and_on_leader_is_respected():
    clock = VirtualClock(1000.0)
    fired, leader = [], {"value": False}

    async def job():
        fired.append(clock.now)

    led = Timer(job, interval=10, on_leader=True)
    task = asyncio.create_task(led.run(clock, lambda: leader["value"]))
    await clock.advance_to(1035)
    assert fired == []
    leader["value"] = True
    await clock.advance_to(1071)
    task.cancel()
    assert fired == [1040.0, 1050.0, 1060.0, 1070.0]


def test_bad_timer_definitions_are_rejected():
    with pytest.raises(ValueError, match="crontab"):
        Timer(lambda: None, cron="not a cron")
    with pytest.raises(ValueError):
        Timer(lambda: None, interval=0)


async def test_app_timer_runs_inside_the_worker():
    name = f"tm-{uuid.uuid4().hex[:6]}"
    app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False)
    ticks = []

    @app.timer(0.05, on_leader=True)
    async def tick():
        ticks.append(app.is_leader)

    async with app.running():
        await wait_for(lambda: len(ticks) >= 3, 5)
    assert all(ticks)


async def test_pageviews_example_emits_each_closed_minute_once(monkeypatch, tmp_path):
    from streamkit.transport.memory import MemoryBroker

    ex = load_example("pageviews", monkeypatch, tmp_path)
    async with ex.app.running():
        await ex.feed(600)  # 10 minutes of views of 3 pages
        broker = MemoryBroker.named(ex.app.conf.bootstrap_servers)

        def emitted():
            return ex.final_counts([(m.key, m.value) for part in broker.logs.get(ex.per_minute.name, [])
                                    for m in part if m.value is not None])

        await wait_for(lambda: len(emitted()) == 30, 20, message="10 minutes of 3 pages emitted")
        rows = emitted()
        assert [n for page, start, n in rows if page == "/page/0"] == [20] * 10
        assert sum(n for _, _, n in rows) == 600 and len(set(rows)) == 30


async def test_card_windows_example_emits_hopping_session_and_sliding_results(monkeypatch, tmp_path):
    from streamkit.transport.memory import MemoryBroker

    ex = load_example("card_windows", monkeypatch, tmp_path)
    async with ex.app.running():
        await ex.feed()
        broker = MemoryBroker.named(ex.app.conf.bootstrap_servers)

        def emitted(topic):
            return [(m.key.decode(), orjson.loads(m.value)) for part in broker.logs.get(topic.name, [])
                    for m in part if m.value is not None]

        await wait_for(lambda: len(emitted(ex.hourly)) == 5 and len(emitted(ex.sessions)) == 2, 20,
                       message="the closed hours and sessions emitted")
        hours = sorted((card, v["start"] - ex.START, v["value"]) for card, v in emitted(ex.hourly))
        assert hours == [("c1", -1800, 1500), ("c1", 0, 1600), ("c1", 1800, 100), ("c2", 0, 1500), ("c2", 1800, 1500)]
        visits = sorted((card, v["start"] - ex.START, v["end"] - ex.START, v["value"]) for card, v in emitted(ex.sessions))
        assert visits == [("c1", 0, 1800, 16), ("c2", 3000, 3240, 5)]
        assert sorted((card, value) for card, value in emitted(ex.alerts)) == [("c2", 1200), ("c2", 1500)]
