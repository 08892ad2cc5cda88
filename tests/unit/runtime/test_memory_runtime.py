"""The runtime's logic on the in-memory driver: deterministic, no broker."""
import asyncio
import uuid

import pytest

import streamkit as sk
from streamkit.runtime.dead_letters import HEADER_OFFSET, HEADER_STAGE
from streamkit.testing import wait_for
from streamkit.transport import TP
from streamkit.transport.memory import MemoryBroker
from streamkit.transport.partitioner import partition_for_key
from tests.helpers import collected


class Order(sk.Record):
    id: int
    user: str
    amount: float


def make_app(**settings):
    name = f"mem-{uuid.uuid4().hex[:6]}"
    return sk.App(name, broker=f"memory://{name}", driver="memory", commit_interval=0.05,
                  web_enabled=False, **settings)


def log_of(app, topic):
    broker = MemoryBroker.named(app.conf.bootstrap_servers)
    return [m for part in broker.logs.get(topic, []) for m in part]


async def test_agent_sinks_every_record_in_key_order():
    app = make_app()
    src = app.topic("in", key_type=str, value_type=Order, partitions=4)
    out = app.topic("out", key_type=str, value_type=Order, partitions=4)

    @app.agent(src, sink=[out])
    async def passthrough(stream):
        async for order in stream:
            yield order

    async with app.running():
        for i in range(1000):
            await src.send(key=f"u{i % 13}", value=Order(i, f"u{i % 13}", i))
        await wait_for(lambda: len(log_of(app, "out")) == 1000, 10, message="1000 outputs")
        await wait_for(lambda: sum(app.runtime.checkpoint.committed.get(TP("in", p), 0) for p in range(4)) == 1000, 5)
    per_key: dict[str, list[int]] = {}
    for m in log_of(app, "out"):
        per_key.setdefault(m.key.decode(), []).append(Order.loads(m.value).id)
    assert all(ids == sorted(ids) for ids in per_key.values())
    assert sum(map(len, per_key.values())) == 1000


async def test_group_by_repartitions_with_murmur2_and_downstream_sees_all():
    app = make_app()
    src = app.topic("orders", key_type=str, value_type=Order, partitions=3)
    seen = []

    @app.agent(src)
    async def by_user(stream):
        async for order in stream.group_by(Order.user):
            seen.append((stream.current_event, order))

    async with app.running():
        for i in range(300):
            await src.send(key=str(i), value=Order(i, f"user-{i % 17}", 1.0))
        await wait_for(lambda: len(seen) == 300, 10, message="300 repartitioned")
    repartition = log_of(app, f"{app.id}-by_user-user-repartition")
    assert len(repartition) == 300
    for m in repartition:
        assert m.partition == partition_for_key(m.key, 3)
        assert Order.loads(m.value).user == m.key.decode()


async def test_filter_map_take_items_events():
    app = make_app()
    src = app.topic("nums", value_type=int, partitions=2)
    got: dict[str, list] = {"fm": [], "take": [], "items": [], "events": []}

    @app.agent(src)
    async def fm(stream):
        async for v in stream.filter(lambda x: x % 2 == 0).map(lambda x: x * 10):
            got["fm"].append(v)

    @app.agent(src)
    async def chunks(stream):
        async for chunk in stream.take(7, within=0.2):
            got["take"].append(chunk)

    @app.agent(src)
    async def items(stream):
        async for key, value in stream.items():
            got["items"].append((key, value))

    @app.agent(src)
    async def events(stream):
        async for event in stream.events():
            got["events"].append((event.topic, event.partition, event.offset))

    async with app.running():
        for i in range(20):
            await src.send(key=f"k{i}", value=i)
        await wait_for(lambda: sum(map(len, got["take"])) == 20 and len(got["events"]) == 20, 10)
    assert sorted(got["fm"]) == [i * 10 for i in range(0, 20, 2)]
    assert all(len(c) <= 7 for c in got["take"])
    assert sorted(v for _, v in got["items"]) == list(range(20))
    assert len(set(got["events"])) == 20


async def test_concurrency_commits_only_contiguous_progress():
    app = make_app(fetch_max_records=5)
    src = app.topic("slow", value_type=int, partitions=1)
    release = asyncio.Event()
    done = []

    @app.agent(src, concurrency=3)
    async def work(stream):
        async for v in stream:
            if v == 0:
                await release.wait()  # the first batch is stuck while later ones finish
            done.append(v)

    async with app.running():
        for i in range(15):
            await src.send(value=i, partition=0)
        await wait_for(lambda: len(done) >= 10, 10)
        # A checkpoint now, with later records done: the stuck first record holds the offset at 0.
        assert (await app.runtime.checkpoint.commit()).get(TP("slow", 0)) == 0
        assert app.runtime.checkpoint.committed.get(TP("slow", 0), 0) == 0
        release.set()
        await wait_for(lambda: app.runtime.checkpoint.committed.get(TP("slow", 0)) == 15, 10)


@pytest.mark.parametrize("policy", ["dlq", "skip"])
async def test_decode_errors_and_poison_records_follow_the_policy(policy):
    app = make_app(error_policy=policy, agent_retries=1)
    src = app.topic("mixed", value_type=Order, partitions=2)
    processed = []
    attempts = []

    @app.agent(src)
    async def strict(stream):
        async for order in stream:
            if order.user == "poison":
                attempts.append(order.id)
                raise ValueError("cannot handle poison")
            processed.append(order.id)

    async with app.running():
        for i in range(50):
            if i % 10 == 3:
                await app.send_raw("mixed", None, b"{broken", partition=i % 2)
            elif i % 10 == 7:
                await src.send(value=Order(i, "poison", 0), partition=i % 2)
            else:
                await src.send(value=Order(i, "ok", 0), partition=i % 2)
        await wait_for(lambda: len(processed) == 40, 10, message="good records")
        await wait_for(lambda: sum(app.runtime.checkpoint.committed.get(TP("mixed", p), 0) for p in (0, 1)) == 50, 10)
        assert app.runtime.errors.counts[policy] == 10
    assert sorted(attempts) == sorted([i for i in range(50) if i % 10 == 7] * 2)  # 1 try + 1 retry
    dlq = log_of(app, app.dlq_topic_name)
    if policy == "dlq":
        stages = sorted(dict(m.headers)[HEADER_STAGE].decode() for m in dlq)
        assert stages == ["agent strict"] * 5 + ["decode"] * 5
        assert all(HEADER_OFFSET in dict(m.headers) for m in dlq)
        assert {m.value for m in dlq if dict(m.headers)[HEADER_STAGE] == b"decode"} == {b"{broken"}
    else:
        assert dlq == []


async def test_stop_policy_halts_the_worker_with_a_clear_reason():
    app = make_app(error_policy="stop")
    src = app.topic("strict", value_type=int, partitions=1)

    @app.agent(src)
    async def never(stream):
        async for _ in stream:
            pass

    await app.start()
    runtime = app.runtime
    await app.send_raw("strict", None, b"not-a-number")
    await asyncio.wait_for(runtime.failed.wait(), 5)
    assert isinstance(runtime.fatal, sk.WorkerStopped) and "error_policy=stop" in str(runtime.fatal)
    await app.stop()


async def test_ask_returns_the_agents_reply_and_through_forwards():
    app = make_app()

    @app.agent()
    async def double(stream):
        async for v in stream.through("doubled-in"):
            yield v * 2

    async with app.running():
        answers = await asyncio.gather(*(double.ask(i, timeout=5) for i in range(10)))
    assert answers == [i * 2 for i in range(10)]


async def test_an_agent_with_one_sink_topic_sends_each_output_there_under_its_key_and_replies_when_asked():
    """A generator agent's one sink topic is served by a send bound once (agent.py); a request's
    reply still goes to the asker, after the sink."""
    app = make_app()
    numbers = app.topic("numbers", value_type=int)
    doubled = app.topic("doubled-out", value_type=int)

    @app.agent(numbers, sink=[doubled])
    async def double(stream):
        async for v in stream:
            yield v * 2

    got = collected(app, doubled)

    async with app.running():
        answers = await asyncio.gather(*(double.ask(i, key=f"k{i}", timeout=5) for i in range(5)))
        await numbers.send(key="plain", value=21)
        await wait_for(lambda: len(got) >= 6, 5, message="six outputs in the sink")
    assert answers == [0, 2, 4, 6, 8]
    assert sorted(got) == sorted([(f"k{i}", 2 * i) for i in range(5)] + [("plain", 42)])


async def test_rebalance_between_two_members_commits_and_moves_partitions():
    name = f"mem-{uuid.uuid4().hex[:6]}"
    seen = {"a": [], "b": []}

    def build(tag):
        app = sk.App(name, broker=f"memory://{name}", driver="memory", commit_interval=0.05, web_enabled=False)
        src = app.topic("work", value_type=int, partitions=4)

        @app.agent(src)
        async def count(stream):
            async for value in stream:
                seen[tag].append(value)

        return app, src

    def processed():
        return seen["a"] + seen["b"]

    a, src = build("a")
    b, _ = build("b")
    async with a.running():
        for i in range(40):
            await src.send(value=i, partition=i % 4)
        await wait_for(lambda: len(seen["a"]) == 40, 5)
        async with b.running():
            await wait_for(lambda: len(b.runtime.assigned) > 0, 5, message="b assigned")
            assert a.runtime.assigned.isdisjoint(b.runtime.assigned)
            for i in range(40, 80):
                await src.send(value=i, partition=i % 4)
            await wait_for(lambda: set(processed()) == set(range(80)), 5)
        # b left: a gets its partitions back. A marker per partition, processed after anything
        # a would redo there, shows every record came exactly once.
        for p in range(4):
            await src.send(value=80 + p, partition=p)
        await wait_for(lambda: set(processed()) == set(range(84)), 5, message="the markers")
        assert len(seen["b"]) > 0  # b processed its share
        assert sorted(processed()) == list(range(84)), "a record was processed twice"
    await a.stop()
    await src.app.stop()


async def test_agent_crash_outside_records_restarts_and_timer_survives():
    """An agent raising while it holds no record is restarted; no record is retried or dead-lettered."""
    app = make_app()
    src = app.topic("crashy", value_type=int, partitions=1)
    starts, got, ticks = [], [], []

    @app.agent(src)
    async def crashy(stream):
        starts.append(1)
        if len(starts) <= 2:
            raise RuntimeError("boom outside a record")  # twice, before taking a record
        async for value in stream:
            got.append(value)

    @app.timer(0.05)
    async def flaky():
        ticks.append(1)
        if len(ticks) == 2:
            raise RuntimeError("boom")

    async with app.running():
        for i in range(10):
            await src.send(value=i, partition=0)
        await wait_for(lambda: app.runtime.checkpoint.committed.get(TP("crashy", 0)) == 10, 10,
                       message="all 10 records processed and committed")
        assert got == list(range(10))  # each once, in order
        assert crashy.restarts == 2 and len(starts) == 3
        assert app.runtime.errors.counts == {"dlq": 0, "skip": 0}
        await wait_for(lambda: len(ticks) >= 4, 5, message="timer keeps firing after an exception")
    assert log_of(app, app.dlq_topic_name) == []
