"""The app of the Basics section of Faust's testing guide (``import faust`` changed only): an
agent that re-keys its stream with ``group_by`` and counts in a table."""
import streamkit as faust

app = faust.App('test-example')


class Order(faust.Record, serializer='json'):
    account_id: str
    product_id: str
    amount: int
    price: float


orders_topic = app.topic('orders', value_type=Order)
orders_for_account = app.Table('order-count-by-account', default=int)


@app.agent(orders_topic)
async def order(orders):
    async for order in orders.group_by(Order.account_id):
        orders_for_account[order.account_id] += 1
        yield order
