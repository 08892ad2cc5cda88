"""The StatefulProcessor that runs a fold on Spark can be built (its imports resolve)."""
import pytest

pytest.importorskip("pyspark")

from pyspark.sql.streaming.stateful_processor import StatefulProcessor  # noqa: E402

from streamkit.spark.agents import fold_processor  # noqa: E402


def test_fold_processor_builds():
    # It imported WrongPartition from tables.table, where it never was: every fold on Spark
    # failed with ImportError before reading a record.
    processor = fold_processor("no_such_module:app", "running_sum", 4)
    assert isinstance(processor, StatefulProcessor)
