"""The app of "Testing and windowed tables" in Faust's testing guide (``import faust`` changed
only): ``group_by`` into a windowed table, relative to the stream."""
import streamkit as faust


class Order(faust.Record, serializer='json'):
    account_id: str
    product_id: str
    amount: int
    price: float


app = faust.App('test-example')
orders_topic = app.topic('orders', value_type=Order)

# order count within the last hour (window is a 1-hour TumblingWindow).
orders_for_account = app.Table(
    'order-count-by-account', default=int,
).tumbling(3600).relative_to_stream()


@app.agent(orders_topic)
async def process_order(orders):
    async for order in orders.group_by(Order.account_id):
        orders_for_account[order.account_id] += 1
        yield order
