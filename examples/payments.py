"""Payments: flag large payments and keep each user's spend.

The same definitions run on Spark (to backfill months of history) and in the worker (for live
traffic); see docs/spark.md. ``python examples/payments.py seed N [--start K]`` produces payments
K..K+N-1 to the broker in STREAMKIT_BROKER, with the STREAMKIT_* security settings.
"""
import os

import streamkit as sk
from streamkit.cli import argument, option

NAME = os.environ.get("PAYMENTS_NAME", "payments")  # to run several copies on one broker (the tests do)
app = sk.App(NAME, topic_partitions=4, session_timeout_ms=6000, heartbeat_interval_ms=1000)


class Payment(sk.Record):
    id: str
    user: str
    amount: float


class Spend(sk.Record):
    user: str
    total: float
    payments: int


payments = app.topic(NAME, key_type=str, value_type=Payment)
large = app.topic(f"{NAME}-large", key_type=str, value_type=Payment)
spend_updates = app.topic(f"{NAME}-spend", key_type=str, value_type=Spend)
spend = app.Table("spend", default=lambda: [0.0, 0])


@app.agent(payments, sink=[large])
def flag_large(payment: Payment) -> Payment | None:
    """Payments of 1,000 or more, for review."""
    return payment if payment.amount >= 1000 else None


@app.fold(payments, table=spend, sink=[spend_updates])
def user_spend(state: list, payment: Payment) -> tuple[list, list[Spend]]:
    """Total and count of each user's payments (the record key is the user)."""
    total, count = state
    state = [round(total + payment.amount, 2), count + 1]
    return state, [Spend(payment.user, state[0], state[1])]


@app.command(argument("count", type=int), option("--start", type=int, default=0, show_default=True,
                                                 help="Number of the first payment."))
async def seed(self, count: int, start: int) -> None:
    """Produce payments START..START+COUNT-1, through the app's own producer (its broker, TLS and
    SASL settings); success is printed only once the broker acknowledged every one."""
    await app.ensure_topics()  # 4 partitions, like the table (auto-creation would make 1)
    for i in range(start, start + count):
        user = f"user{i % 50}"
        await payments.send(key=user, value=Payment(f"p{i}", user, float((i * 7919) % 1500)))
    await app.flush()  # raises, naming the topic, if any payment was not delivered
    self.say(f"sent payments p{start}..p{start + count - 1}")


if __name__ == "__main__":
    app.main()
