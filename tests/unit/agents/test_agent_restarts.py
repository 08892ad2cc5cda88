# ruff: noqa: SLF001 - white-box: this file reads or drives internals on purpose
"""An agent that keeps crashing outside a record: restarted with a growing backoff, then failed
(one line, /ready 503 naming it, a metric, exit 1 when the worker stops; its other agents go on)
instead of looping while the worker says it is healthy; ``streamkit topology`` refuses an app
whose agent cannot start, in one line, exit 2."""
import asyncio
import logging
import os
import signal
import subprocess
import sys
import uuid

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

import streamkit as sk
from streamkit.devbroker import free_port
from streamkit.runtime.runner import serve
from streamkit.testing import wait_for
from streamkit.transport import TP


def make_app(tmp_path, **settings):
    name = f"restarts-{uuid.uuid4().hex[:6]}"
    settings.setdefault("web_enabled", False)
    return sk.App(name, broker=f"memory://{name}", driver="memory", commit_interval=0.05, data_dir=str(tmp_path),
                  **settings)


def crashing_agent(app, starts):
    @app.agent(app.topic("in", value_type=int, partitions=1))
    async def doomed(stream):
        starts.append(asyncio.get_running_loop().time())
        raise AttributeError("'Derived' object has no attribute 'nope'")
        async for _ in stream:  # unreachable: what makes it an agent over the stream
            pass

    return doomed


async def test_restarts_back_off_then_the_agent_fails_and_the_worker_is_not_ready(tmp_path, caplog):
    port = free_port()
    app = make_app(tmp_path, agent_max_restarts=3, web_enabled=True, web_port=port)
    starts: list[float] = []
    doomed = crashing_agent(app, starts)
    healthy_in = app.topic("healthy", value_type=int, partitions=1)
    healthy_got: list[int] = []

    @app.agent(healthy_in)
    async def healthy(stream):
        async for value in stream:
            healthy_got.append(value)

    caplog.set_level(logging.INFO)
    async with app.running(), aiohttp.ClientSession() as session:
        await wait_for(lambda: doomed.failure is not None, 15, message="the agent failed")
        await healthy_in.send(value=7, partition=0)  # the worker goes on for its other agents
        await wait_for(lambda: healthy_got == [7], 15, message="the healthy agent's record processed")
        assert app.runtime.fatal is None
        assert all(task.done() for task in doomed._tasks), "a failed agent is not run again"
        assert len(starts) == 4  # the first run and agent_max_restarts restarts
        gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
        assert all(gap >= want for gap, want in zip(gaps, (0.1, 0.2, 0.4), strict=False)), gaps
        async with session.get(f"http://127.0.0.1:{port}/ready") as resp:
            status, body = resp.status, await resp.json()
        assert status == 503 and body["ready"] is False
        assert list(body["failed_agents"]) == [doomed.name] and "AttributeError" in body["failed_agents"][doomed.name]
        async with session.get(f"http://127.0.0.1:{port}/metrics") as resp:
            families = {f.name: f for f in text_string_to_metric_families(await resp.text())}
        [sample] = [s for s in families["streamkit_agent_failed"].samples if s.labels["agent"] == doomed.name]
        assert sample.value == 1
    assert isinstance(doomed.failure, sk.AgentFailed) and "AttributeError" in str(doomed.failure)
    tracebacks = [r for r in caplog.records if r.name == "streamkit.agent" and r.exc_info]
    assert len(tracebacks) == 1, "the traceback is logged once, then one line per restart"
    failed = [r.getMessage() for r in caplog.records if "agent_max_restarts=3" in r.getMessage()]
    assert len(failed) == 1 and doomed.name in failed[0] and "/ready answers 503" in failed[0], failed


async def test_a_crash_loop_is_not_ready_while_it_backs_off_and_ready_again_after(tmp_path):
    """Between a crash and its restart the agent processes nothing: /ready answers 503 naming it
    and why, not 200; once it runs again (here: it stops crashing) /ready is 200 again."""
    port = free_port()
    app = make_app(tmp_path, agent_max_restarts=50, web_enabled=True, web_port=port)
    src = app.topic("flaky", value_type=int, partitions=1)
    crashes = {"left": 6}

    @app.agent(src)
    async def flaky(stream):
        if crashes["left"]:
            crashes["left"] -= 1
            raise ConnectionError("the lookup service is down")
        async for _ in stream:
            pass

    async def ready():
        async with session.get(f"http://127.0.0.1:{port}/ready") as resp:
            return resp.status, await resp.json()

    async with app.running(), aiohttp.ClientSession() as session:
        seen = []

        async def restarting():
            seen.append(await ready())
            return seen[-1][0] == 503 and "flaky" in seen[-1][1].get("restarting_agents", {})

        await wait_for(restarting, 15, interval=0.05, message="/ready 503 while the agent backs off")
        status, body = seen[-1]
        assert body["ready"] is False and "ConnectionError: the lookup service is down" in body["restarting_agents"][
            flaky.name] and "restart" in body["restarting_agents"][flaky.name]

        async def running_again():
            seen.append(await ready())
            return seen[-1][0] == 200

        await wait_for(running_again, 30, interval=0.1, message="/ready 200 once the agent runs again")
        assert crashes["left"] == 0 and flaky.failure is None and flaky.restarting is None
        assert "restarting_agents" not in seen[-1][1]


async def test_the_worker_stopped_after_an_agent_failed_exits_1_naming_it(tmp_path, capsys):
    app = make_app(tmp_path, agent_max_restarts=1)
    starts: list[float] = []
    doomed = crashing_agent(app, starts)
    serving = asyncio.ensure_future(serve(app))
    await wait_for(lambda: doomed.failure is not None or serving.done(), 15, message="the agent failed")
    assert not serving.done(), "the worker keeps running (not ready) until it is stopped"
    os.kill(os.getpid(), signal.SIGTERM)  # serve() handles it: a graceful stop
    assert await asyncio.wait_for(serving, 30) == 1
    err = capsys.readouterr().err
    assert f"streamkit: agent {doomed.name!r} failed" in err and "Traceback" not in err, err


async def test_a_restart_after_taking_records_starts_the_count_again(tmp_path):
    """Crashing outside a record after making progress is not a crash loop: never failed."""
    app = make_app(tmp_path, agent_max_restarts=1)
    src = app.topic("steps", value_type=int, partitions=1)
    got: list[int] = []

    @app.agent(src)
    async def stepper(stream):
        stream.noack()
        async for value in stream:
            got.append(value)
            stream.ack(stream.current_event)
            raise RuntimeError("boom after each record, holding none")

    async with app.running():
        for i in range(5):
            await src.send(value=i, partition=0)
        await wait_for(lambda: app.runtime.checkpoint.committed.get(TP("steps", 0)) == 5, 15,
                       message="all 5 records processed and committed")
        assert got == list(range(5)) and stepper.restarts == 5
        assert app.runtime.fatal is None and stepper.failure is None


def test_a_negative_restart_limit_is_refused():
    try:
        sk.App("x", broker="memory://x", driver="memory", agent_max_restarts=-1)
    except sk.ConfigurationError as exc:
        assert "agent_max_restarts=-1" in str(exc)
    else:
        raise AssertionError("agent_max_restarts=-1 was accepted")


def test_topology_of_an_app_whose_agent_cannot_start_is_one_line_and_exit_2():
    out = subprocess.run([sys.executable, "-m", "streamkit", "topology", "-A",
                          "tests.unit.agents.test_agent_restarts:broken"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    assert "agent 'doomed' cannot start" in lines[0] and "AttributeError" in lines[0], lines
    assert out.stdout == ""


broken = sk.App("broken-topology", broker="memory://broken", driver="memory", web_enabled=False)
crashing_agent(broken, [])
