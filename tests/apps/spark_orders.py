"""Orders app for the Spark tests: the same agents and fold, built twice (one app run by Spark,
one by the worker) so their outputs can be compared record for record.

SPARK_ORDERS_BROKER and SPARK_ORDERS_RUN (a suffix for every topic) configure it.
"""
import os

import streamkit as sk

RUN = os.environ.get("SPARK_ORDERS_RUN", "local")
BROKER = os.environ.get("SPARK_ORDERS_BROKER", "127.0.0.1:9092")
PARTITIONS = 3


class Order(sk.Record):
    id: str
    user: str
    amount: float


class UserTotal(sk.Record):
    user: str
    total: float
    orders: int


def build(role: str) -> sk.App:
    app = sk.App(f"orders-{role}-{RUN}", broker=f"kafka://{BROKER}", driver="confluent", commit_interval=0.5,
                 session_timeout_ms=6000, heartbeat_interval_ms=1000, topic_partitions=PARTITIONS,
                 web_enabled=False)
    orders = app.topic(f"orders-{RUN}", key_type=str, value_type=Order, partitions=PARTITIONS)
    big = app.topic(f"big-{role}-{RUN}", key_type=str, value_type=Order, partitions=PARTITIONS)
    totals_out = app.topic(f"totals-{role}-{RUN}", key_type=str, value_type=UserTotal, partitions=PARTITIONS)
    totals = app.Table("totals", default=lambda: [0.0, 0], partitions=PARTITIONS)

    @app.agent(orders, sink=[big])
    async def big_orders(stream):
        """Orders of 50 or more, with the amount rounded up to whole units."""
        async for order in stream:
            if order.amount >= 50:
                yield Order(order.id, order.user, float(int(order.amount) + 1))

    @app.fold(orders, table=totals, sink=[totals_out])
    def user_totals(state, order):
        total, count = state
        state = [round(total + order.amount, 2), count + 1]
        return state, [UserTotal(order.user, state[0], state[1])]

    spend = app.Table("spend", default=float)  # takes the repartition topic's count, as in the worker
    spend_out = app.topic(f"spend-{role}-{RUN}", key_type=str, value_type=float, partitions=PARTITIONS)

    @app.agent(orders, sink=[spend_out])
    async def spend_by_initial(stream):
        """Spend per user initial: re-keyed through a repartition topic, summed in a table."""
        async for order in stream.group_by(lambda o: o.user[:2], name="initial"):
            spend[order.user[:2]] += order.amount
            yield round(spend[order.user[:2]], 2)

    return app


spark_app = build("spark")
worker_app = build("worker")
eos_app = build("eos")
