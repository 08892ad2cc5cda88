"""Agents that Spark cannot run exactly as the worker does are refused, with the reason."""
import pytest

import streamkit as sk

pytest.importorskip("pyspark")

from streamkit import SparkUnsupported  # noqa: E402
from streamkit.spark.checks import check_runnable  # noqa: E402

app = sk.App("refusals", broker="kafka://127.0.0.1:1")
source = app.topic("refusals-in", value_type=int)
out = app.topic("refusals-out", value_type=int)
counts = app.Table("counts", default=int)
rates = app.GlobalTable("rates")


@app.agent(source, sink=[out])
async def doubles(stream):
    async for value in stream:
        yield value * 2


@app.agent(source, sink=[out])
def halves(value):
    return value // 2 if value % 2 == 0 else None


@app.fold(source, table=counts, sink=[out])
def running_sum(total, value):
    return total + value, [total + value]


@app.agent(source)
async def counting(stream):
    async for value in stream:
        counts[value] += 1


@app.agent(source, sink=[out])
async def converting(stream):
    async for value in stream:
        yield value * rates.get("eur", 1)


@app.agent(source)
async def forwarding(stream):
    async for value in stream:
        await out.send(value=value)


@app.agent(source, sink=[out])
async def regrouping(stream):
    async for value in stream.group_by(lambda v: v % 3, name="mod3"):
        yield value


@app.agent(source, sink=[out])
async def batching(stream):
    async for values in stream.take(10, within=1.0):
        yield sum(values)


@app.agent(source, sink=[print])
async def printing(stream):
    async for value in stream:
        yield value


@app.agent(source, sink=[out])
async def items(stream):
    """Named as the stream method it calls: ``stream.items`` is an attribute, not this agent."""
    async for _key, value in stream.items():
        yield value


@pytest.mark.parametrize("agent", ["doubles", "halves", "running_sum", "counting", "regrouping", "items"])
def test_pure_agents_folds_and_keyed_agents_are_accepted(agent):
    """counting keeps a table, regrouping re-keys: both run per key (spark/keyed.py)."""
    check_runnable(app.agents[agent])


@pytest.mark.parametrize("agent, reason", [
    ("converting", "global table 'rates'"),
    ("forwarding", "coroutine"),
    ("batching", "take()"),
    ("printing", "callable"),
])
def test_refused_with_the_reason(agent, reason):
    with pytest.raises(SparkUnsupported, match=reason.replace("(", r"\(").replace(")", r"\)")):
        check_runnable(app.agents[agent])


def test_a_coroutine_without_tables_is_refused_and_one_with_a_table_is_keyed():
    from streamkit.spark.checks import is_keyed

    assert is_keyed(app.agents["counting"]) and is_keyed(app.agents["regrouping"])
    assert not is_keyed(app.agents["doubles"]) and not is_keyed(app.agents["running_sum"])
    with pytest.raises(SparkUnsupported, match="coroutine that keeps no table"):
        check_runnable(app.agents["forwarding"])


def test_a_windowed_table_runs_per_partition_and_what_a_task_cannot_replay_is_refused():
    """Windows close by the partition's stream time: such an agent runs per table partition
    (spark/partitioned.py). The wall clock and window-close callbacks are refused, naming them."""
    from streamkit.spark.partitioned import windowed_tables

    per_minute = app.Table("per-minute", default=int).tumbling(60)

    @app.agent(source, sink=[out], name="windowing")
    async def windowing(stream):
        async for value in stream:
            per_minute[value] += 1
            yield per_minute[value].current()

    check_runnable(windowing)
    assert [t.name for t in windowed_tables(windowing)] == ["per-minute"]
    by_parity = app.Table("by-parity", default=int).tumbling(60)

    @app.agent(source, name="regrouped_windows")
    async def regrouped_windows(stream):
        async for value in stream.group_by(lambda v: v % 2, name="parity"):
            by_parity[value % 2] += 1

    from streamkit.spark.keyed import plan

    regrouped = plan(regrouped_windows)  # re-keyed first, then per partition of the new key
    assert regrouped.key_of is not None and regrouped.key_of(3) == 1 and regrouped.tables == [by_parity.table]
    by_wall_clock = app.Table("by-clock", default=int).tumbling(60).relative_to_now()

    @app.agent(source, name="clocked")
    async def clocked(stream):
        async for value in stream:
            by_wall_clock[value] += 1

    with pytest.raises(SparkUnsupported, match="'by-clock'.*relative_to_now"):
        check_runnable(clocked)

    def closed(key, value):
        print(key, value)

    calls_back = app.Table("calls-back", default=int, on_window_close=closed).tumbling(60)

    @app.agent(source, name="calling_back")
    async def calling_back(stream):
        async for value in stream:
            calls_back[value] += 1

    with pytest.raises(SparkUnsupported, match=r"'calls-back' has on_window_close=.*\.final\(topic\)"):
        check_runnable(calling_back)


def test_a_globaltable_join_runs_by_the_looked_up_key_and_direct_reads_are_refused():
    """A GlobalTable join runs grouped by its looked-up key (spark/lookups.py), the stream keeping
    its keys; a global table read outside a join, or a join beside other tables or a group_by, is
    refused with the way to split the agent."""
    from streamkit.errors import ConfigurationError
    from streamkit.spark.keyed import plan

    @app.agent(source, sink=[out], name="pricing")
    async def pricing(stream):
        async for value, rate in stream.join(rates, on=lambda v: "eur" if v % 2 else "usd", how="left"):
            yield value * (rate or 1)

    check_runnable(pricing)
    lookup = plan(pricing).lookup
    assert lookup is not None and lookup[0] is rates and lookup[1](3) == "eur"

    @app.agent(source, name="pricing_and_counting")
    async def pricing_and_counting(stream):
        async for value, _rate in stream.join(rates, on=lambda v: "eur"):
            counts[value] += 1

    with pytest.raises(ConfigurationError, match="joins GlobalTable 'rates' and uses table.*'counts'.*split"):
        check_runnable(pricing_and_counting)

    @app.agent(source, sink=[out], name="regrouped_pricing")
    async def regrouped_pricing(stream):
        async for value, _rate in stream.group_by(lambda v: v % 3, name="m3").join(rates, on=lambda v: "eur"):
            yield value

    with pytest.raises(ConfigurationError, match="uses group_by"):
        check_runnable(regrouped_pricing)


def test_sending_from_a_generator_is_refused():
    @app.agent(source, sink=[out], name="sending")
    async def sending(stream):
        async for value in stream:
            await out.send(value=value)
            yield value

    with pytest.raises(SparkUnsupported, match="send or ask directly"):
        check_runnable(sending)


async def _outputs(agent_name, values, **conf):
    from streamkit.runtime.event import Event
    from streamkit.spark.agents import AgentRun, drive
    from streamkit.transport.base import Message

    run = AgentRun.for_app(app, agent_name)  # the task's state, without importing the app by name
    events = [Event(None, v, Message("refusals-in", 0, i, None, str(v).encode(), None, None))
              for i, v in enumerate(values)]
    await drive(run, events)
    return [int(v) for t, v in zip(run.out.topic, run.out.value, strict=False) if t == "refusals-out"], run.out


@app.agent(source, sink=[out])
async def one_then_return(stream):
    async for value in stream:
        yield value
        return


@app.agent(source, sink=[out])
async def fails_on_three(stream):
    async for value in stream:
        if value == 3:
            raise ValueError("three")
        yield value


async def test_a_generator_that_returns_is_restarted_on_the_same_stream():
    outputs, _ = await _outputs("one_then_return", [1, 2, 3])
    assert outputs == [1, 2, 3]


async def test_a_failing_record_goes_to_the_dead_letter_rows_and_the_rest_continue():
    outputs, rows = await _outputs("fails_on_three", [1, 2, 3, 4])
    assert outputs == [1, 2, 4]
    assert rows.topic.count(app.dlq_topic_name) == 1


def test_several_agents_at_once_need_available_now():
    """Continuous queries of several agents would commit over each other in the app's group."""
    from click.testing import CliRunner

    from streamkit.cli.main import cli

    done = CliRunner().invoke(cli, ["spark", "-A", "examples.payments:app", "flag_large", "user_spend",
                                    "--checkpoint", "/tmp/streamkit-never-written"])
    assert done.exit_code == 2, done.output
    assert "several agents need --available-now" in done.output and "Traceback" not in done.output


def test_a_stream_table_join_plans_its_table_as_an_input_and_an_as_of_join_is_refused():
    """``stream.join(table, on=...)`` on Spark: the stream re-keyed by ``on`` (as the worker's
    repartition) and the table's changelog read beside it (spark/keyed.py)."""
    from datetime import timedelta

    from streamkit.spark.keyed import plan

    class Order(sk.Record):
        id: str
        customer: str

    orders = app.topic("refusals-orders", key_type=str, value_type=Order)
    customers = app.Table("customers-r")
    prices = app.Table("prices-r", history=timedelta(hours=1))

    @app.agent(orders, sink=[out], name="enriching")
    async def enriching(stream):
        async for _order, customer in stream.join(customers, on=Order.customer, how="left"):
            yield len(customer or "")

    @app.agent(orders, sink=[out], name="as_of")
    async def as_of(stream):
        async for _order, price in stream.join(prices, as_of=True):
            yield price

    check_runnable(enriching)
    planned = plan(enriching)
    assert [t.name for t in planned.joined] == ["customers-r"] and planned.key_of(Order("o1", "c9")) == "c9"
    assert list(planned.changelogs()) == [customers.changelog.name]
    with pytest.raises(sk.ConfigurationError, match="'as_of' cannot run on Spark: an as-of join is not built"):
        plan(as_of)
