"""``myapp.py`` of "Setting up a test suite" in Faust's testing guide (``import faust`` changed
only): a pure consumer that writes a table, calls a service and forwards to a topic."""
import streamkit as faust


class Order(faust.Record, serializer='json'):
    account_id: str
    amount: int


app = faust.App('orders-app', broker='kafka://localhost:9092')

orders_topic = app.topic('orders', value_type=Order)
shipped_topic = app.topic('shipped', value_type=Order)

orders_for_account = app.Table('order-count-by-account', default=int)


async def notify_warehouse(order: Order) -> None:
    """Pretend this calls an external HTTP service."""
    ...


@app.agent(orders_topic)
async def track_order(orders):
    # NOTE: no ``yield`` -- this agent is a pure consumer.
    async for order in orders:
        orders_for_account[order.account_id] += 1
        await notify_warehouse(order)
        await shipped_topic.send(value=order)
