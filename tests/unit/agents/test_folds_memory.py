"""Keyed folds and plain-function agents in the worker (in-memory driver)."""
import uuid

import streamkit as sk
from streamkit.testing import wait_for
from streamkit.transport.memory import MemoryBroker


def build(tmp_path):
    name = f"fold-{uuid.uuid4().hex[:6]}"
    app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, store="memory://",
                 data_dir=str(tmp_path), commit_interval=0.05)
    amounts = app.topic("amounts", key_type=str, value_type=int, partitions=2)
    totals_out = app.topic("totals", key_type=str, value_type=int, partitions=2)
    evens = app.topic("evens", key_type=str, value_type=int, partitions=2)
    totals = app.Table("totals", default=int)

    @app.fold(amounts, table=totals, sink=[totals_out])
    def running_total(total, amount):
        return total + amount, [total + amount] if amount else []

    @app.agent(amounts, sink=[evens])
    def even(amount):
        return amount if amount % 2 == 0 else None

    return app, amounts, totals


def records(app, topic):
    broker = MemoryBroker.named(app.conf.bootstrap_servers)
    return [m for part in broker.logs.get(topic, []) for m in part]


async def test_fold_keeps_state_per_key_in_its_table_and_emits_under_the_key(tmp_path):
    app, amounts, totals = build(tmp_path)
    async with app.running():
        for i in range(40):
            await amounts.send(key=f"k{i % 4}", value=i % 5)
        await wait_for(lambda: len(records(app, "totals")) == 32, timeout=10)  # amount 0 emits nothing
        await wait_for(lambda: len(records(app, "evens")) == 24, timeout=10)
        expected = {f"k{k}": sum(i % 5 for i in range(40) if i % 4 == k) for k in range(4)}
        assert dict(totals.items()) == expected
    last = {}
    for m in sorted(records(app, "totals"), key=lambda m: (m.partition, m.offset)):
        last[m.key.decode()] = int(m.value)
    assert last == expected
    assert app.agents["running_total"].fold is not None and app.agents["even"].per_record


async def test_a_fold_that_returns_a_bare_value_goes_to_the_error_policy(tmp_path):
    name = f"fold-{uuid.uuid4().hex[:6]}"
    app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, store="memory://",
                 data_dir=str(tmp_path), commit_interval=0.05, agent_retries=0)
    source = app.topic("in", key_type=str, value_type=int, partitions=1)
    table = app.Table("t", default=int)

    @app.fold(source, table=table)
    def broken(state, value):
        return state + value  # not (state, outputs)

    async with app.running():
        await source.send(key="a", value=1)
        await wait_for(lambda: len(records(app, app.dlq_topic_name)) == 1, timeout=10)
    dead = records(app, app.dlq_topic_name)[0]
    assert b"must return (state, outputs)" in dict(dead.headers)["streamkit-error"]
