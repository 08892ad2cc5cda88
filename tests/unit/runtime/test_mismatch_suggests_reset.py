"""An internal topic left with another partition count (a restarted dev broker recreated the
app's topics with other counts) is refused with the command that starts the app afresh."""
from __future__ import annotations

import uuid

import streamkit as sk
from streamkit.runtime.runner import serve
from streamkit.transport.memory import MemoryBroker


async def test_a_changelog_with_another_partition_count_suggests_streamkit_reset(tmp_path, capsys):
    name = f"reset-hint-{uuid.uuid4().hex[:6]}"
    MemoryBroker.named(name).create_topic(f"{name}-totals-changelog", 1)  # as a broker default made it
    app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, data_dir=str(tmp_path))
    orders = app.topic("orders", key_type=str, value_type=int, partitions=3)
    totals = app.Table("totals", default=int)

    @app.agent(orders)
    async def add(stream):
        async for event in stream.events():
            totals[event.key] += event.value

    assert await serve(app) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"streamkit: topic '{name}-totals-changelog' exists with 1 partitions but is declared "
                          "with 3; "), err
    assert "`streamkit reset -A <module:app>`" in err and "\n" not in err, err
