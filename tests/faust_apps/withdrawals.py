"""Faust's withdrawals example (windowed tables) as a Faust user writes it; ``import faust`` is the
only line changed. The records come from another app (a Faust producer), so the Record names its
namespace: both sides read and write the ``__faust`` blessed key under it.

    python withdrawals.py worker -l info
"""
from datetime import datetime

import streamkit as faust


class Withdrawal(faust.Record, isodates=True, serializer="json", namespace="bank.Withdrawal"):
    user: str
    country: str
    amount: float
    date: datetime = None


class Total(faust.Record, namespace="bank.Total"):
    user: str
    window_start: float
    total: float


app = faust.App(
    "faust-withdrawals",
    broker="kafka://localhost:9092",
    store="rocksdb://",
    topic_partitions=4,
)
withdrawals_topic = app.topic("withdrawals", value_type=Withdrawal)
totals_topic = app.topic("withdrawal-totals", value_type=Total)
country_totals_topic = app.topic("withdrawal-country-totals", value_type=float)

user_to_total = app.Table("user_to_total", default=int).tumbling(3600, expires=24 * 3600).relative_to_field(
    Withdrawal.date)
country_to_total = app.Table("country_to_total", default=int).hopping(7200, 3600, expires=24 * 3600)\
    .relative_to_field(Withdrawal.date)


@app.agent(withdrawals_topic)
async def track_user_withdrawal(withdrawals):
    async for withdrawal in withdrawals:
        user_to_total[withdrawal.user] += withdrawal.amount
        hour = withdrawal.date.timestamp() // 3600 * 3600
        await totals_topic.send(key=withdrawal.user, value=Total(
            user=withdrawal.user, window_start=hour, total=user_to_total[withdrawal.user].current()))


@app.agent(withdrawals_topic)
async def track_country_withdrawal(withdrawals):
    async for withdrawal in withdrawals.group_by(Withdrawal.country):
        country_to_total[withdrawal.country] += withdrawal.amount
        await country_totals_topic.send(key=withdrawal.country, value=country_to_total[withdrawal.country].current())


if __name__ == "__main__":
    app.main()
