"""SIGUSR1 on a worker prints where each task waits: the evidence a stalled worker leaves."""
from __future__ import annotations

import asyncio
import io
import os
import signal

import pytest

from streamkit.runtime.diagnostics import dump_state, install_dump_signal


async def _stuck_on(event: asyncio.Event) -> None:
    await event.wait()


def test_dump_names_each_task_and_the_line_it_waits_on() -> None:
    async def main() -> str:
        never = asyncio.Event()
        task = asyncio.create_task(_stuck_on(never), name="commit-loop")
        await asyncio.sleep(0)  # let it reach its await
        out = io.StringIO()
        text = dump_state(out)
        task.cancel()
        assert out.getvalue() == text
        return text

    text = asyncio.run(main())
    assert "task commit-loop" in text
    assert "_stuck_on" in text and "await event.wait()" in text
    assert "thread MainThread" in text


@pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="no SIGUSR1 on this platform")
def test_sigusr1_dumps_to_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        install_dump_signal(loop)
        never = asyncio.Event()
        task = asyncio.create_task(_stuck_on(never), name="stalled-fetch")
        os.kill(os.getpid(), signal.SIGUSR1)
        deadline = loop.time() + 5
        while "stalled-fetch" not in capfd.readouterr().err:  # readouterr consumes: accumulate
            assert loop.time() < deadline, "no task dump on SIGUSR1"
            await asyncio.sleep(0.01)
        task.cancel()
        loop.remove_signal_handler(signal.SIGUSR1)

    asyncio.run(main())


async def _outer(event: asyncio.Event) -> None:
    await _stuck_on(event)


def test_dump_follows_a_task_down_to_the_innermost_await() -> None:
    """``Task.print_stack`` shows only the task's own frame: an agent waiting deep in a stream
    showed as waiting in ``supervise`` (a stalled chaos run's dump, outage45)."""
    async def main() -> str:
        never = asyncio.Event()
        task = asyncio.create_task(_outer(never), name="agent")
        await asyncio.sleep(0)
        text = dump_state(io.StringIO())
        task.cancel()
        return text

    text = asyncio.run(main())
    agent = text.split("task agent:")[1].split("task ")[0]
    assert agent.index("in _outer") < agent.index("in _stuck_on") < agent.index("in wait")


def test_a_running_workers_dump_says_what_gates_its_records(tmp_path) -> None:
    import streamkit as sk
    from streamkit.runtime.diagnostics import flow_state
    from streamkit.testing import wait_for
    from streamkit.transport import TP

    app = sk.App("diag-flow", broker="memory://diag-flow", driver="memory", web_enabled=False, store="memory://",
                 data_dir=str(tmp_path))
    numbers = app.topic("numbers", key_type=str, value_type=int, partitions=2)

    @app.agent(numbers)
    async def take(stream):
        async for _ in stream:
            pass

    async def main() -> str:
        async with app.running():
            await wait_for(lambda: app.runtime.assigned, 10)
            app.runtime.pauses.hold("recovery", [TP(numbers.name, 1)])
            return dump_state(io.StringIO(), flow=lambda: flow_state(app.runtime))

    text = asyncio.run(main())
    flow = text.split("--- streamkit: flow ---")[1].split("---")[0]
    assert "assigned: [TP(topic='numbers', partition=0), TP(topic='numbers', partition=1)]" in flow
    assert "paused: {TP(topic='numbers', partition=1): ['recovery']}" in flow
    assert "barrier closed: False" in flow and "subscriber" in flow
