"""Which agent failures are retried, and how loud each one is (memory driver, no broker).

A failure no retry can fix (streamkit's WrongPartition, a type the user names in
``agent_no_retry`` or ``@app.agent(no_retry=...)``) goes to the error policy at once with one
log line; an exception from the agent's own code is retried ``agent_retries`` times with its
traceback logged once, its later attempts one line each.
"""
import logging
import uuid

import pytest

import streamkit as sk
from streamkit.testing import wait_for
from streamkit.transport.partitioner import partition_for_key


def make_app(**settings):
    name = f"retry-{uuid.uuid4().hex[:6]}"
    return sk.App(name, broker=f"memory://{name}", driver="memory", commit_interval=0.05,
                  web_enabled=False, store="memory://", **settings)


def about(caplog, where):
    """The log records naming the record at ``where`` (``topic[p]@offset``)."""
    return [r for r in caplog.records if where in r.getMessage()]


async def _after_one_failure(app, src, done, *, partition=0):
    """Send a failing record then a good one; wait for the error policy and the good record."""
    await src.send(key="bad", value=1, partition=partition)
    await wait_for(lambda: sum(app.runtime.errors.counts.values()) == 1, 10, message="the error policy ran")
    await src.send(key="good", value=2, partition=partition)
    await wait_for(lambda: done == [2], 10, message="the next record was processed")


async def test_wrong_partition_goes_to_the_policy_at_once_with_one_line(caplog):
    caplog.set_level(logging.DEBUG)
    app = make_app(agent_retries=2)
    src = app.topic("wp-in", key_type=str, value_type=int, partitions=2)
    counts = app.Table("wp-counts", default=int, partitions=2, key_partitioning="strict")
    other = next(k for k in (f"k{i}" for i in range(100)) if partition_for_key(k.encode(), 2) == 1)
    attempts, done = [], []

    @app.agent(src)
    async def count(stream):
        async for value in stream:
            if value == 1:
                attempts.append(value)
                counts[other] += 1  # a key of partition 1 written while processing partition 0
            done.append(value)

    async with app.running():
        await _after_one_failure(app, src, done)
        assert app.runtime.errors.counts["dlq"] == 1
    assert attempts == [1]  # not retried
    lines = about(caplog, "wp-in[0]@0")
    assert len(lines) == 1, [r.getMessage() for r in lines]
    assert "belongs to partition 1" in lines[0].getMessage() and "WrongPartition" in lines[0].getMessage()
    assert all(r.exc_info is None for r in caplog.records) and "Traceback" not in caplog.text


async def test_an_exception_of_the_agent_is_retried_with_its_traceback_logged_once(caplog):
    caplog.set_level(logging.DEBUG)
    app = make_app(agent_retries=2)
    src = app.topic("user-in", key_type=str, value_type=int, partitions=1)
    attempts, done = [], []

    @app.agent(src)
    async def fragile(stream):
        async for value in stream:
            if value == 1:
                attempts.append(value)
                raise ValueError("cannot handle 1")
            done.append(value)

    async with app.running():
        await _after_one_failure(app, src, done)
    assert attempts == [1, 1, 1]  # one try and agent_retries retries
    lines = about(caplog, "user-in[0]@0")
    assert len(lines) == 4, [r.getMessage() for r in lines]  # three attempts, then the policy
    assert [r.exc_info is not None for r in lines] == [True, False, False, False]
    assert caplog.text.count("Traceback") == 1
    assert "attempt 2 of 3" in lines[1].getMessage() and "ValueError: cannot handle 1" in lines[1].getMessage()


@pytest.mark.parametrize("spelling", ["setting", "agent"])
async def test_a_type_named_not_retried_goes_to_the_policy_at_once(caplog, spelling):
    caplog.set_level(logging.DEBUG)
    app = make_app(agent_retries=2, **({"agent_no_retry": (KeyError,)} if spelling == "setting" else {}))
    src = app.topic("noretry-in", key_type=str, value_type=int, partitions=1)
    attempts, done = [], []

    @app.agent(src, **({"no_retry": (LookupError,)} if spelling == "agent" else {}))
    async def lookup(stream):
        async for value in stream:
            if value == 1:
                attempts.append(value)
                raise KeyError("no such customer")
            done.append(value)

    async with app.running():
        await _after_one_failure(app, src, done)
    assert attempts == [1]
    lines = about(caplog, "noretry-in[0]@0")
    assert len(lines) == 1 and lines[0].exc_info is None, [r.getMessage() for r in lines]
    assert "KeyError" in lines[0].getMessage()


def test_agent_no_retry_takes_exception_types_or_their_names():
    assert make_app(agent_no_retry=KeyError).conf.agent_no_retry == (KeyError,)
    names = sk.Settings.from_env({"STREAMKIT_AGENT_NO_RETRY": "KeyError, streamkit.errors:DecodeError"})
    assert names.agent_no_retry == (KeyError, sk.DecodeError)
    with pytest.raises(sk.ConfigurationError, match="agent_no_retry.*'Nope'.*exception type"):
        make_app(agent_no_retry=("Nope",))
    with pytest.raises(sk.ConfigurationError, match="agent_no_retry.*42.*exception type"):
        make_app(agent_no_retry=(42,))
    with pytest.raises(sk.ConfigurationError, match=r"no_retry.*42.*exception type"):
        make_app().agent(no_retry=(42,))
