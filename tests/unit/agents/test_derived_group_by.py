"""group_by/through after filter/map (Faust allows that order): the values that come out of the
operators are forwarded, the records filtered out are not, yet still count as processed."""
import uuid

import streamkit as sk
from streamkit.testing import wait_for
from streamkit.transport import TP
from streamkit.transport.memory import MemoryBroker


class Order(sk.Record):
    id: int
    user: str
    amount: float


def make_app(**settings):
    name = f"derived-{uuid.uuid4().hex[:6]}"
    return sk.App(name, broker=f"memory://{name}", driver="memory", commit_interval=0.05, web_enabled=False,
                  **settings)


def log_of(app, topic):
    broker = MemoryBroker.named(app.conf.bootstrap_servers)
    return [m for part in broker.logs.get(topic, []) for m in part]


def committed(app, topic, partitions):
    return sum(app.runtime.checkpoint.committed.get(TP(topic, p), 0) for p in range(partitions))


async def test_filter_then_group_by_counts_per_new_key_and_commits_what_it_filtered_out():
    app = make_app()
    src = app.topic("orders", key_type=str, value_type=Order, partitions=3)
    counts: dict[str, int] = {}
    keys_seen: set[bool] = set()

    @app.agent(src)
    async def big_by_user(stream):
        async for order in stream.filter(lambda o: o.amount >= 10).group_by(Order.user):
            keys_seen.add(sk.current_event().key == order.user)
            counts[order.user] = counts.get(order.user, 0) + 1

    orders = [Order(i, f"user-{i % 7}", float(i % 20)) for i in range(300)]
    expected: dict[str, int] = {}
    for order in orders:
        if order.amount >= 10:
            expected[order.user] = expected.get(order.user, 0) + 1
    async with app.running():
        for order in orders:
            await src.send(key=str(order.id), value=order)
        await wait_for(lambda: counts == expected, 10, message="the counts per user")
        await wait_for(lambda: committed(app, "orders", 3) == 300, 10,
                       message="every source record committed, the filtered-out ones too")
        assert "orders" in app.runtime.topology.subscribed
        assert f"{app.id}-big_by_user-user-repartition" in app.runtime.topology.subscribed
    assert keys_seen == {True}
    repartition = log_of(app, f"{app.id}-big_by_user-user-repartition")
    assert len(repartition) == 150  # only what passed the filter was forwarded
    assert all(Order.loads(m.value).amount >= 10 for m in repartition)


async def test_map_then_group_by_forwards_the_mapped_values_and_filter_then_through_keeps_keys():
    app = make_app()
    src = app.topic("orders", key_type=str, value_type=Order, partitions=2)
    upper: list[str] = []
    evens: list[tuple[str, int]] = []

    @app.agent(src)
    async def shout(stream):
        async for order in stream.map(lambda o: Order(o.id, o.user.upper(), o.amount)).group_by(
                Order.user, value_type=Order):
            upper.append(order.user)

    @app.agent(app.topic("nums", key_type=str, value_type=int, partitions=2))
    async def even(stream):
        async for event in stream.filter(lambda v: v % 2 == 0).through("even-nums").events():
            evens.append((event.key, event.value))

    async with app.running():
        for i in range(20):
            await src.send(key=str(i), value=Order(i, f"u{i % 3}", 1.0))
            await app.topics["nums"].send(key=f"k{i}", value=i)
        await wait_for(lambda: len(upper) == 20 and len(evens) == 10, 10, message="both agents' records")
        await wait_for(lambda: committed(app, "nums", 2) == 20, 10, message="every number committed")
    assert set(upper) == {"U0", "U1", "U2"}
    assert {m.key.decode() for m in log_of(app, f"{app.id}-shout-user-repartition")} == {"U0", "U1", "U2"}
    assert sorted(evens) == sorted((f"k{i}", i) for i in range(0, 20, 2))


async def test_a_filter_that_raises_in_the_forwarder_is_dead_lettered_and_forwarding_goes_on():
    """The forwarder runs the operators again after a failure (a generator that raised is over)."""
    app = make_app(agent_retries=1)
    src = app.topic("orders", key_type=str, value_type=Order, partitions=1)
    seen: list[int] = []

    @app.agent(src)
    async def inverse(stream):
        async for order in stream.filter(lambda o: 1 / o.amount > 0).group_by(Order.user):
            seen.append(order.id)

    async with app.running():
        for i in range(10):
            await src.send(key=str(i), value=Order(i, "u", 0.0 if i == 3 else 1.0), partition=0)
        await wait_for(lambda: sorted(seen) == [i for i in range(10) if i != 3], 10,
                       message="every record but the poison one forwarded")
        await wait_for(lambda: committed(app, "orders", 1) == 10, 10, message="the poison record committed too")
    assert len(log_of(app, app.dlq_topic_name)) == 1
