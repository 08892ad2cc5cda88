"""Faust's testing guide, as a Faust user writes the test (``import faust`` changed only; the
fixture drops ``event_loop``, which pytest-asyncio 1.x no longer has)."""
from datetime import timedelta

import pytest

from tests.faust_apps.orders import Order, app, order, orders_per_day


@pytest.fixture()
def test_app():
    app.finalize()
    app.conf.store = "memory://"
    app.flow_control.resume()
    return app


@pytest.mark.asyncio()
async def test_order(test_app):
    # start and stop the agent in this block
    async with order.test_context() as agent:
        order_ = Order(account_id="1", product_id="2", amount=1, price=300)
        # sent order to the test agents local channel, and wait
        # the agent to process it.
        event = await agent.put(order_, key=order_.account_id)
        # at this point the agent already updated the table
        assert test_app.tables["order-count-by-account"][order_.account_id] == 1
        assert agent.results[event.message.offset] == 300
        event = await agent.put(order_, key=order_.account_id)
        assert test_app.tables["order-count-by-account"][order_.account_id] == 2
        # the windowed table, read relative to the event as Faust's tests do
        assert orders_per_day[order_.account_id].current(event) == 2
        assert orders_per_day[order_.account_id].delta(timedelta(days=2), event) == 0


@pytest.mark.asyncio()
async def test_an_order_put_without_a_key_is_processed_and_the_context_warns_once(test_app):
    async with order.test_context() as agent:
        with pytest.warns(UserWarning, match="without a key.*key the records"):
            await agent.put(Order(account_id="7", product_id="2", amount=3, price=1.5))
        await agent.put(Order(account_id="7", product_id="2", amount=1, price=1.5))
        assert test_app.tables["order-count-by-account"]["7"] == 2


@pytest.mark.asyncio()
async def test_each_context_starts_from_empty_tables(test_app):
    for _ in range(2):
        async with order.test_context() as agent:
            await agent.put(Order(account_id="5", product_id="2", amount=1, price=1.0), key="5")
            assert test_app.tables["order-count-by-account"]["5"] == 1

