"""Card payments watched through the other three window types: hopping, session and sliding.

    python card_windows.py feed        # send the payments (then run a worker: streamkit worker -A card_windows:app)

- ``spend``: each card's spend per hour, a new hour every half hour (hopping), each closed hour
  to ``card-spend-hourly`` once;
- ``shopping``: payments of a card at most 10 minutes apart form one session; each session's
  payment count goes to ``card-sessions`` when it closes;
- ``recent``: each card's spend over *any* 10 minutes (sliding); above ``LIMIT`` an alert.

``tests/unit/project/test_examples_and_timers.py`` runs it and checks every emitted value.
"""
import asyncio
import os
import sys
import time

import streamkit as sk

app = sk.App("card-windows", broker=os.environ.get("STREAMKIT_BROKER", "127.0.0.1:9092"),
             session_timeout_ms=6000, heartbeat_interval_ms=1000)


class Payment(sk.Record):
    card: str
    amount: int


payments = app.topic("card-payments", key_type=str, value_type=Payment, partitions=4)
hourly = app.topic("card-spend-hourly", key_type=str, partitions=4)
sessions = app.topic("card-sessions", key_type=str, partitions=4)
alerts = app.topic("card-alerts", key_type=str, value_type=int, partitions=4)

spend = app.Table("card-spend", default=int).hopping(3600, 1800).final(hourly)
shopping = app.Table("card-shopping", default=int).session(600).final(sessions)
recent = app.Table("card-recent", default=int).sliding(600)
LIMIT = 1000
# four hours ago, on the hour: record times inside any broker's time retention (a fixed date
# would get the inputs deleted by Kafka's 7-day retention), and Kafka refuses times over an hour ahead
START = (int(time.time()) // 3600 - 4) * 3600


@app.agent(payments)
async def watch(stream):
    async for payment in stream:
        spend[payment.card] += payment.amount
        shopping[payment.card] += 1
        recent[payment.card] += payment.amount
        if recent[payment.card].current() > LIMIT:
            await alerts.send(key=payment.card, value=recent[payment.card].current())


async def feed() -> None:
    """Card c1 pays 100 every 2 minutes for half an hour (never over the limit in 10 minutes);
    c2 pays 300 every minute for 5 minutes from 50 minutes in (over it from the 4th payment);
    a payment of 0 three hours later on each card closes what came before."""
    for i in range(16):
        await payments.send(key="c1", value=Payment(card="c1", amount=100), timestamp=START + 120 * i)
    for i in range(5):
        await payments.send(key="c2", value=Payment(card="c2", amount=300), timestamp=START + 3000 + 60 * i)
    for card in ("c1", "c2"):
        await payments.send(key=card, value=Payment(card=card, amount=0), timestamp=START + 3 * 3600)
    await app.flush()


async def _feed_and_stop() -> None:
    await feed()
    await app.stop()


if __name__ == "__main__" and sys.argv[1:] == ["feed"]:
    asyncio.run(_feed_and_stop())
