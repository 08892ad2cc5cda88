"""Every background loop of a worker is supervised: an unexpected exception halts the worker
with one line naming the loop (a loop that cannot be restarted safely: consuming, committing)
or restarts the loop with a log line (broker watch, membership heartbeat). A silently dead
commit loop once left a worker running for minutes without committing anything."""
from __future__ import annotations

import asyncio
import logging
import uuid

import pytest

import streamkit as sk
from streamkit.runtime import loops
from streamkit.runtime.broker_watch import BrokerWatch
from streamkit.runtime.membership import Membership
from streamkit.runtime.worker import Runtime
from streamkit.testing import wait_for


def make_app(**settings):
    name = f"loops-{uuid.uuid4().hex[:6]}"
    app = sk.App(name, broker=f"memory://{name}", driver="memory", commit_interval=0.05, web_enabled=False,
                 store="memory://", **settings)
    source = app.topic("in", key_type=str, value_type=int, partitions=2)
    app.Table("seen", default=int, partitions=2)  # tables bring the membership loops

    @app.agent(source)
    async def consume(stream):
        async for _ in stream:
            pass

    return app


@pytest.mark.parametrize("method, loop_name", [("_checkpoint_due", "commit"), ("_subscribe", "consume")])
async def test_an_unexpected_exception_in_a_vital_loop_halts_the_worker_with_one_line(monkeypatch, caplog,
                                                                                      method, loop_name):
    def boom(self):
        raise TypeError("'<=' not supported between instances of 'str' and 'float'")

    monkeypatch.setattr(Runtime, method, boom)
    app = make_app()
    with caplog.at_level(logging.INFO, logger="streamkit"):
        async with app.running():
            runtime = app.runtime
            await wait_for(runtime.failed.is_set, 5, message=f"the worker halting on its dead {loop_name} loop")
    assert loop_name in str(runtime.fatal) and "TypeError" in str(runtime.fatal), runtime.fatal
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and loop_name in errors[0] and "not supported" in errors[0], errors


@pytest.mark.parametrize("cls, loop_name", [(BrokerWatch, "broker watch"), (Membership, "membership heartbeat")])
async def test_an_unexpected_exception_in_a_restartable_loop_restarts_it_with_a_log_line(monkeypatch, caplog,
                                                                                       cls, loop_name):
    method = "_run" if cls is BrokerWatch else "_heartbeat"
    original = getattr(cls, method)
    calls = []

    async def flaky(self):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("unexpected")
        await original(self)

    monkeypatch.setattr(cls, method, flaky)
    monkeypatch.setattr(loops, "RESTART_BACKOFF", (0.01, 0.05))
    app = make_app()
    with caplog.at_level(logging.WARNING, logger="streamkit"):
        async with app.running():
            await wait_for(lambda: len(calls) >= 2, 5, message=f"the {loop_name} loop restarted")
            assert not app.runtime.failed.is_set()
    lines = [r.getMessage() for r in caplog.records if loop_name in r.getMessage()]
    assert len(lines) == 1 and "restarting" in lines[0] and "RuntimeError('unexpected')" in lines[0], lines


async def test_a_restarted_loop_backs_off_and_a_cancelled_one_ends_quietly(caplog):
    runs: list[float] = []
    loop = asyncio.get_running_loop()

    async def failing() -> None:
        runs.append(loop.time())
        raise ValueError("again")

    with caplog.at_level(logging.WARNING, logger="streamkit"):
        task = loops.restarting("test loop", failing, backoff=(0.01, 0.04))
        await wait_for(lambda: len(runs) >= 5, 5, message="five runs")
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert task.cancelled()
    gaps = [b - a for a, b in zip(runs, runs[1:], strict=False)]
    assert gaps[-1] >= 0.035, gaps  # grew to the ceiling
    assert all("test loop" in r.getMessage() for r in caplog.records)
