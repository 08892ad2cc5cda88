"""Faust's windowing examples (tumbling.py, hopping.py), the import the only line changed, run on
the in-memory transport: every record they are sent is counted, as faust-streaming counts it."""
from __future__ import annotations

import importlib
import uuid

import pytest

from streamkit.testing import wait_for
from streamkit.transport.memory import MemoryBroker


def on_memory(module_name: str):
    """The example's module, its app moved to the in-memory transport (a fresh broker)."""
    module = importlib.import_module(f"tests.faust_apps.{module_name}")
    app = module.app
    name = f"{module_name}-{uuid.uuid4().hex[:6]}"
    app.conf.broker = f"memory://{name}"
    app.conf.driver = "memory"
    app.conf.store = "memory://"
    app.conf.web_enabled = False
    app.conf.commit_interval = 0.05
    return module


def logged(app, topic: str) -> list:
    broker = MemoryBroker.named(app.conf.bootstrap_servers)
    return [m for part in broker.logs.get(topic, []) for m in part]


def counted(wrapper) -> int:
    """The sum of the example's 'counter' over every window of every partition."""
    return sum(v for (key, _start), v in wrapper.table.items() if key == "counter")


@pytest.mark.parametrize(("example", "table", "windows_per_record"),
                         [("tumbling", "tumbling_table", 1), ("hopping", "hopping_table", 2)])
async def test_the_windowing_example_counts_every_record_of_every_partition(example, table, windows_per_record,
                                                                           caplog):
    module = on_memory(example)
    app, topic, wrapper = module.app, getattr(module, f"{example}_topic"), getattr(module, table)
    sent = lambda: logged(app, topic.get_topic_name())  # noqa: E731
    async with app.running():
        for i in range(32):  # the example's records, spread over its topic's 8 partitions
            await topic.send(value=module.Model(random=0.5), partition=i % 8)
        # its own timer sends more meanwhile: every record in the topic is counted, none dead-lettered
        await wait_for(lambda: len(sent()) >= 32 and counted(wrapper) == windows_per_record * len(sent()), 20,
                       message="every record counted")
        assert sum(app.runtime.errors.counts.values()) == 0
        assert {m.partition for m in sent()} == set(range(8))
    warned = [r for r in caplog.records if "not in the partition its key hashes to" in r.getMessage()]
    assert len(warned) == 1 and table in warned[0].getMessage()
