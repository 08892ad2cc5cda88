"""The app of Faust's testing guide, as a Faust user writes it (``import faust`` changed only)."""
from datetime import timedelta

import streamkit as faust


class Order(faust.Record, serializer="json"):
    account_id: str
    product_id: str
    amount: int
    price: float


app = faust.App("faust-orders", broker="kafka://localhost:9092", store="rocksdb://")
orders_topic = app.topic("orders", value_type=Order)
order_count_by_account = app.Table("order-count-by-account", default=int)
orders_per_day = app.Table("orders-per-day", default=int).tumbling(timedelta(days=1)).relative_to_stream()


@app.agent(orders_topic)
async def order(orders):
    async for order in orders:
        # process infinite stream of orders.
        print(f"Order for {order.account_id}: {order.amount}")
        order_count_by_account[order.account_id] += 1
        orders_per_day[order.account_id] += order.amount
        yield order.amount * order.price


if __name__ == "__main__":
    app.main()
