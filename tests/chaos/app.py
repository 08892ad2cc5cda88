"""The chaos harness's worker: sum per key in a table, one output per input.

CHAOS_APP_ID, CHAOS_IN, CHAOS_OUT, CHAOS_PARTITIONS and CHAOS_GUARANTEE configure it (set by
the controller; CHAOS_FINAL adds a tumbling per-minute count whose final values go there;
CHAOS_FOLD runs the same as an ``@app.fold``); the driver and broker come from STREAMKIT_DRIVER
and STREAMKIT_BROKER.
"""
import os

import streamkit as sk

partitions = int(os.environ.get("CHAOS_PARTITIONS", "6"))
app = sk.App(os.environ.get("CHAOS_APP_ID", "chaos"),
             processing_guarantee=os.environ.get("CHAOS_GUARANTEE", "exactly_once"),
             commit_interval=float(os.environ.get("CHAOS_COMMIT_INTERVAL", "0.5")),
             transaction_timeout_ms=15000, session_timeout_ms=6000, heartbeat_interval_ms=1000,
             web_enabled=False)
inputs = app.topic(os.environ.get("CHAOS_IN", "chaos-in"), key_type=str, value_type=int, partitions=partitions)
outputs = app.topic(os.environ.get("CHAOS_OUT", "chaos-out"), key_type=str, value_type=int, partitions=partitions)
sums = app.Table("sums", default=int)  # takes the input topic's partition count
if os.environ.get("CHAOS_FINAL"):  # --windows: per-key counts per minute of event time, final values out
    final = app.topic(os.environ["CHAOS_FINAL"], key_type=str, partitions=partitions)
    per_minute = (app.Table("per-minute", default=int).tumbling(60)
                  .relative_to_field(lambda seq: seq / 100).final(final))  # event time: 100 inputs per second
else:
    per_minute = None


if os.environ.get("CHAOS_FOLD"):  # --fold: the same as a keyed fold, which the worker runs over each batch in hand
    if per_minute is not None:
        raise SystemExit("--fold and --windows: the fold keeps one table; run them separately")

    @app.fold(inputs, table=sums, sink=[outputs])
    def add(total, seq):
        """Add each input's sequence number to its key's sum and emit the sequence number once."""
        return total + seq, [seq]
else:
    @app.agent(inputs)
    async def add(stream):
        """Add each input's sequence number to its key's sum and emit the sequence number once."""
        async for event in stream.events():
            sums[event.key] += event.value
            if per_minute is not None:
                per_minute[event.key] += 1
            await outputs.send_soon(key=event.key, value=event.value)
