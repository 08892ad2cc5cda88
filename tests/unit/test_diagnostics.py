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
