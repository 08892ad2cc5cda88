"""Runs under faust-streaming itself: a Faust app that writes withdrawals (JSON lines on stdin) to
the topic the streamkit app reads, as another team's Faust service would.

    python produce_withdrawals.py <broker host:port> <topic>  < rows.jsonl
"""
import asyncio
import json
import sys
from datetime import datetime

import faust


class Withdrawal(faust.Record, isodates=True, serializer="json", namespace="bank.Withdrawal"):
    user: str
    country: str
    amount: float
    date: datetime = None


app = faust.App("faust-withdrawals-producer", broker=f"kafka://{sys.argv[1]}")
topic = app.topic(sys.argv[2], value_type=Withdrawal)


async def main() -> None:
    rows = [json.loads(line) for line in sys.stdin if line.strip()]
    for row in rows:
        row["date"] = datetime.fromisoformat(row["date"])
        await topic.send(key=row["user"], value=Withdrawal(**row))
    await app.producer.flush()
    await app.producer.stop()
    print(f"faust sent {len(rows)}")


asyncio.run(main())
