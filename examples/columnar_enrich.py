"""Sensor readings enriched a batch at a time: a columnar agent (docs/guide.md, "Columnar agents").

The function takes a pyarrow RecordBatch of the readings of one fetched batch and returns the
output rows; the worker runs it (``streamkit worker``), and Spark runs it unchanged
(``app.spark.run("to_celsius", ...)``: docs/spark.md). ``COLUMNAR_NAME`` names the app and its
topics, so the tests run several copies on one broker.
"""
import os

import pyarrow as pa
import pyarrow.compute as pc

import streamkit as sk

NAME = os.environ.get("COLUMNAR_NAME", "readings")
app = sk.App(NAME, topic_partitions=3, session_timeout_ms=6000, heartbeat_interval_ms=1000)


class Reading(sk.Record):
    sensor: str
    seq: int
    fahrenheit: float


class Celsius(sk.Record):
    sensor: str
    seq: int
    celsius: float
    hot: bool


readings = app.topic(NAME, key_type=str, value_type=Reading)
celsius = app.topic(f"{NAME}-celsius", key_type=str, value_type=Celsius)


@app.agent(readings, sink=[celsius], columnar=True)
def to_celsius(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Every reading in Celsius, flagged hot above 30 °C, keyed by its sensor."""
    degrees = pc.round(pc.divide(pc.subtract(batch.column("fahrenheit"), 32.0), 1.8), 2)
    return pa.RecordBatch.from_arrays(
        [batch.column("key"), batch.column("sensor"), batch.column("seq"), degrees, pc.greater(degrees, 30.0)],
        names=["key", "sensor", "seq", "celsius", "hot"])
