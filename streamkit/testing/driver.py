"""``TestDriver``: run an app in the test's process, on the in-memory broker, on a virtual clock.

    async with TestDriver(app) as driver:
        await driver.send(withdrawals, key="u1", value=Withdrawal(...), timestamp=1000.0)
        await driver.settle()                       # every agent is done, a checkpoint ran
        assert driver.table("user_to_total")["u1"].now() == 10
        await driver.advance(3600)                  # timers, crontabs and windows move an hour
        assert driver.records(totals)[-1].value == ...

The app is the one users deploy, unchanged: the driver points it at a private in-memory broker
(``driver="memory"``), memory stores and a temporary data directory, and puts back its settings
when it leaves. ``settle`` waits until every record sent so far (and everything agents sent on
from them) was processed, then runs a checkpoint (windows close and emit there), and fails at
its deadline. ``advance`` moves the virtual clock: timers and crontabs due in between fire in
order, ``relative_to_now`` windows and ``close_idle_after`` see the new time.
"""
from __future__ import annotations

import asyncio
import shutil
import tempfile
import uuid
from dataclasses import dataclass
from typing import Any

from ..timers import Clock
from ..transport.base import TP
from ..transport.memory import MemoryBroker


class VirtualClock(Clock):
    """Time that moves only when told: sleepers wake in order as ``advance`` passes them."""

    def __init__(self, start: float = 1_767_225_600.0) -> None:  # 2026-01-01T00:00:00Z
        self.now = float(start)
        self.sleepers: list[tuple[float, asyncio.Future]] = []

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        fut = asyncio.get_running_loop().create_future()
        self.sleepers.append((self.now + max(0.0, seconds), fut))
        try:
            await fut
        finally:
            self.sleepers = [(t, f) for t, f in self.sleepers if f is not fut]

    async def advance(self, seconds: float) -> None:
        await self.advance_to(self.now + seconds)

    async def advance_to(self, until: float) -> None:
        """Move to ``until``, stopping at each sleeper's wake-up on the way (so a timer that
        fires and sleeps again fires again within the span)."""
        while True:
            for _ in range(3):  # let woken tasks run up to their next sleep
                await asyncio.sleep(0)
            due = min((t for t, f in self.sleepers if not f.done()), default=None)
            if due is None or due > until:
                self.now = max(self.now, until)
                return
            self.now = max(self.now, due)
            for t, fut in list(self.sleepers):
                if t <= self.now and not fut.done():
                    fut.set_result(None)


@dataclass(frozen=True)
class SentRecord:
    """A record as it sits in a topic of the test's broker, decoded with the topic's codecs."""

    key: Any
    value: Any
    partition: int
    offset: int
    timestamp: float  # seconds
    headers: list[tuple[str, bytes]]


_OVERRIDES = ("driver", "broker", "store", "data_dir", "web_enabled")


class TestDriver:
    """Runs ``app`` for the duration of an ``async with`` block (module docstring)."""

    __test__ = False  # not a test class, whatever pytest's name pattern says

    def __init__(self, app: Any, *, start: float | None = None, web: bool = False) -> None:
        self.app = app
        self.clock = VirtualClock(start) if start is not None else VirtualClock()
        self._web = web
        self._saved: dict[str, Any] = {}
        self._saved_clock: Any = None
        self._data_dir: str | None = None
        self._broker_name = f"test-{uuid.uuid4().hex[:8]}"

    async def __aenter__(self) -> "TestDriver":
        app, conf = self.app, self.app.conf
        self._saved = {name: getattr(conf, name) for name in _OVERRIDES}
        self._saved_clock = app.clock
        self._data_dir = tempfile.mkdtemp(prefix="streamkit-test-")
        conf.driver, conf.broker, conf.store = "memory", f"memory://{self._broker_name}", "memory://"
        conf.data_dir, conf.web_enabled = self._data_dir, self._web
        app._driver = None  # built anew from the settings above  # noqa: SLF001 - the test driver swaps the App's driver
        app.clock = self.clock
        try:
            await app.start()
            await self._wait(lambda: app.runtime.assigned and (app.runtime.tables is None or app.runtime.tables.ready),
                             10.0, "the worker to be assigned its partitions")
        except BaseException:
            await self._restore()
            raise
        return self

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await self.app.stop()
        finally:
            await self._restore()

    async def _restore(self) -> None:
        app = self.app
        app.conf.freeze(False)
        for name, value in self._saved.items():
            setattr(app.conf, name, value)
        app.clock = self._saved_clock
        app._driver = None  # noqa: SLF001 - the test driver swaps the App's driver
        MemoryBroker.forget(self._broker_name)
        if self._data_dir is not None:
            shutil.rmtree(self._data_dir, ignore_errors=True)

    @property
    def broker(self) -> MemoryBroker:
        return MemoryBroker.named(self._broker_name)

    # -- input ----------------------------------------------------------------------------------

    async def send(self, topic: Any, key: Any = None, value: Any = None, *, timestamp: float | None = None,
                   headers: Any = None, partition: int | None = None) -> tuple[int, int]:
        """Produce one record (timestamp in seconds, the virtual clock's now by default);
        returns its ``(partition, offset)``."""
        target = self.app.topic(topic) if isinstance(topic, str) else topic
        stamp = self.clock.now if timestamp is None else timestamp
        return await target.send_and_wait(key, value, timestamp=stamp, headers=headers, partition=partition)

    # -- time and progress ----------------------------------------------------------------------

    async def advance(self, seconds: float, *, settle: bool = True) -> None:
        """Move the virtual clock; timers and crontabs due meanwhile fire in order."""
        await self.clock.advance(seconds)
        if settle:
            await self.settle()

    async def settle(self, timeout: float = 10.0) -> None:
        """Wait until every record in the topics agents read was processed, then checkpoint;
        repeat until a checkpoint sends nothing new. Fails after ``timeout`` seconds (real time)."""
        runtime = self.app.runtime
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            await self._wait(self._all_processed, deadline - asyncio.get_running_loop().time(),
                             "every record to be processed")
            before = self._log_sizes()
            await runtime.commit()  # as the commit loop does
            if self._log_sizes() == before and self._all_processed():
                return
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"the app kept producing records for {timeout}s after settle() began")

    def _all_processed(self) -> bool:
        runtime = self.app.runtime
        processed = runtime.checkpoint.processed()
        logs = self.broker.logs
        for tp in runtime.assigned:
            partitions = logs.get(tp.topic)
            end = self._readable_end(tp) if partitions and tp.partition < len(partitions) else 0
            if end and processed.get(tp, runtime.checkpoint.committed.get(tp, 0)) < end:
                return False
        return True

    def _readable_end(self, tp: TP) -> int:
        """Where a read_committed reader stops, less trailing transaction markers and aborted
        records (nothing to process there): records of an open transaction (an exactly-once app
        repartitioning) become readable when the next checkpoint commits it."""
        end = self.broker.stable_offset(tp)
        skipped = self.broker.control.get(tp, set()) | self.broker.aborted.get(tp, set())
        while end > 0 and end - 1 in skipped:
            end -= 1
        return end

    def _log_sizes(self) -> dict[TP, int]:
        return {TP(topic, n): len(log) for topic, parts in self.broker.logs.items() for n, log in enumerate(parts)}

    async def _wait(self, condition: Any, timeout: float, what: str) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, timeout)
        while not condition():
            if self.app.runtime is not None and self.app.runtime.fatal is not None:
                raise RuntimeError(f"the worker stopped: {self.app.runtime.fatal!r}")
            if loop.time() > deadline:
                raise TimeoutError(f"timed out waiting for {what}")
            await asyncio.sleep(0.005)

    # -- output ---------------------------------------------------------------------------------

    def records(self, topic: Any) -> list[SentRecord]:
        """Every record of ``topic`` (a topic or its name) in the test's broker, in partition
        then offset order, decoded with the topic's codecs; as a read_committed reader sees them
        (no transaction markers, no aborted records, nothing of an open transaction)."""
        target = self.app.topic(topic) if isinstance(topic, str) else topic
        out = []
        for number, part in enumerate(self.broker.logs.get(target.name, [])):
            tp = TP(target.name, number)
            hidden = self.broker.control.get(tp, set()) | self.broker.aborted.get(tp, set())
            stable = self.broker.stable_offset(tp)
            for m in part:
                if m.offset in hidden or m.offset >= stable:
                    continue
                assert m.timestamp is not None  # the memory broker stamps every record it appends
                out.append(SentRecord(target.key_codec.decode(m.key), target.value_codec.decode(m.value), m.partition,
                                      m.offset, m.timestamp, list(m.headers or [])))
        return out

    def table(self, name: str) -> Any:
        """The app's table ``name`` (windowed tables answer ``[key].now()`` on the virtual clock)."""
        return self.app.tables[name]
