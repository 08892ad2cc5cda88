"""streamkit on Apache Spark (``pip install 'streamkit[spark]'``): the ``streamkit`` data source,
the exactly-once Kafka sink, and agents and keyed folds as Structured Streaming queries.

Reached through ``app.spark`` (see ``facade.py``); importing this package needs pyspark.
"""
from ..errors import SparkUnsupported
from .facade import SparkFacade
from .session import spark_session

__all__ = ["SparkFacade", "SparkUnsupported", "spark_session"]
