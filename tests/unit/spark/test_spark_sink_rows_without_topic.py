"""A row the Spark sink cannot place (no topic column value, no topic option) is refused by name."""
import pytest

pytest.importorskip("pyspark")
pa = pytest.importorskip("pyarrow")

from pyspark.sql.types import BinaryType, StringType, StructField, StructType  # noqa: E402

from streamkit.spark.kafka_io import SparkKafkaError  # noqa: E402
from streamkit.spark.sink import _Target  # noqa: E402


class _Producer:
    def __init__(self):
        self.sent = []

    def produce(self, topic, value, key, **_extra):
        self.sent.append(topic)

    def poll(self, _timeout):
        return 0


def test_a_row_without_a_topic_is_refused():
    schema = StructType([StructField("topic", StringType()), StructField("value", BinaryType())])
    target = _Target({"kafka.bootstrap.servers": "127.0.0.1:1"}, schema)
    batch = pa.record_batch([pa.array([None], pa.string()), pa.array([b"v"], pa.binary())], names=["topic", "value"])
    producer = _Producer()
    with pytest.raises(SparkKafkaError, match="no topic"):
        target.produce_all(producer, iter([batch]))
    assert producer.sent == []
