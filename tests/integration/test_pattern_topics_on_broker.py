"""``app.topic(pattern=...)`` on the dev broker, both drivers: the agent reads every topic whose
whole name matches when the worker starts, and not the others."""
from __future__ import annotations

import streamkit as sk
from streamkit.testing import wait_for


async def test_an_agent_reads_the_topics_matching_its_pattern(broker_address, driver, unique, tmp_path):
    app = sk.App(f"pattern-{unique}", broker=broker_address, driver=driver, topic_partitions=2,
                 web_enabled=False, data_dir=str(tmp_path))
    for name in (f"orders-{unique}-eu", f"orders-{unique}-us", f"orders-{unique}", f"returns-{unique}-eu"):
        await sk.Topic(app, name, partitions=2).declare()
    orders = app.topic(pattern=rf"orders-{unique}-.*", key_type=str, value_type=int)
    seen = []

    @app.agent(orders)
    async def total(stream):
        async for event in stream.events():
            seen.append((event.topic, event.value))

    async with app.running():
        assert orders.topics == (f"orders-{unique}-eu", f"orders-{unique}-us")
        for topic, n in ((f"orders-{unique}-eu", 5), (f"orders-{unique}-us", 7), (f"orders-{unique}", 100),
                         (f"returns-{unique}-eu", 1000)):
            await app.send(topic, key="k", value=n)
        await wait_for(lambda: len(seen) == 2, 60, message="both matching topics read")
        await app.send(f"orders-{unique}-us", key="k", value=1)  # positive marker after the unmatched sends
        await wait_for(lambda: len(seen) == 3, 60, message="the marker read")
    assert sorted(seen) == [(f"orders-{unique}-eu", 5), (f"orders-{unique}-us", 1), (f"orders-{unique}-us", 7)]
