"""The stateful Spark processors' Python work without Spark: stage one (RekeyTask / HomeTask) over
Arrow batches and stage two's StatefulProcessor over ``pyspark.sql.Row`` groups, with in-memory
state handles, for profiling where per-key and per-record time goes (``--profile``).

``python -m benchmarks.spark_stateful_tasks --records 100000 [--profile count]``
"""
from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import pstats
import time
from typing import Any, Iterator

import pyarrow as pa

from streamkit.spark import rows as spark_rows

from . import spark_stateful as bench
from .pipeline import Order


class _Value:
    def __init__(self) -> None:
        self.v: tuple[Any, ...] | None = None

    def exists(self) -> bool:
        return self.v is not None

    def get(self) -> tuple[Any, ...] | None:
        return self.v

    def update(self, v: tuple[Any, ...]) -> None:
        self.v = v

    def clear(self) -> None:
        self.v = None


class _Map:
    def __init__(self) -> None:
        self.d: dict[tuple[Any, ...], tuple[Any, ...]] = {}

    def iterator(self) -> Iterator[tuple[tuple[Any, ...], tuple[Any, ...]]]:
        return iter(list(self.d.items()))

    def updateValue(self, k: tuple[Any, ...], v: tuple[Any, ...]) -> None:  # noqa: N802 - Spark's name
        self.d[k] = v

    def removeKey(self, k: tuple[Any, ...]) -> None:  # noqa: N802 - Spark's name
        self.d.pop(k, None)


class _Handle:
    """Spark's state handle, per grouping key as Spark scopes it."""

    def __init__(self) -> None:
        self.key: Any = None
        self.values: dict[tuple[Any, str], _Value] = {}
        self.maps: dict[tuple[Any, str], _Map] = {}
        handle = self

        class Scoped:
            def __init__(self, name: str, kind: str) -> None:
                self.name, self.kind = name, kind

            def __getattr__(self, attr: str) -> Any:
                store = handle.values if self.kind == "v" else handle.maps
                made = store.setdefault((handle.key, self.name), _Value() if self.kind == "v" else _Map())
                return getattr(made, attr)

        self.scoped = Scoped

    def getValueState(self, name: str, schema: Any) -> Any:  # noqa: N802 - Spark's name
        return self.scoped(name, "v")

    def getMapState(self, name: str, key_schema: Any, value_schema: Any) -> Any:  # noqa: N802 - Spark's name
        return self.scoped(name, "m")


def raw_batch(n: int) -> pa.RecordBatch:
    users = [f"user{i % bench.USERS}" for i in range(n)]
    stamp = dt.datetime(2024, 1, 1)
    return pa.RecordBatch.from_arrays([
        pa.array([bench.ORDERS] * n, pa.string()), pa.array([i % bench.PARTITIONS for i in range(n)], pa.int32()),
        pa.array(range(n), pa.int64()), pa.array([stamp] * n, pa.timestamp("us")),
        pa.array([u.encode() for u in users], pa.binary()),
        pa.array([Order(i, u, float(i % 100), 1.7e9 + i).dumps() for i, u in enumerate(users)], pa.binary()),
        pa.nulls(n, spark_rows.arrow_schema(spark_rows.RAW_SCHEMA).field("headers").type)],
        schema=spark_rows.arrow_schema(spark_rows.RAW_SCHEMA))


def run(scenario: str, n: int) -> float:
    from pyspark.sql import Row

    from streamkit.spark.keyed import RekeyTask, keyed_processor
    from streamkit.spark.partitioned import HOME, HomeTask, partition_processor

    spec = f"benchmarks.spark_stateful:{scenario}_app"
    batch = raw_batch(n)
    start = time.process_time()
    if scenario == "window":
        staged = list(HomeTask(spec, scenario, bench.PARTITIONS, False)(iter([batch])))
        processor = partition_processor(spec, scenario, bench.PARTITIONS)
        group = HOME
    else:
        staged = list(RekeyTask(spec, scenario)(iter([batch])))
        processor = keyed_processor(spec, scenario, bench.PARTITIONS)
        group = "key"
    stage_one = time.process_time() - start
    groups: dict[Any, list[Any]] = {}
    for out in staged:
        for r in out.to_pylist():
            groups.setdefault(r[group], []).append(Row(**r))
    start = time.process_time()
    handle = _Handle()
    processor.init(handle)
    outputs = 0
    for key, rs in groups.items():
        handle.key = key
        outputs += sum(1 for _ in processor.handleInputRows((key,), iter(rs), None))
    processor.close()
    elapsed = time.process_time() - start
    print(f"{scenario}: {n} records, {len(groups)} groups, {outputs} outputs, stage one {stage_one:.2f} s, "
          f"stage two {elapsed:.2f} s (CPU)")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--profile", default="")
    args = parser.parse_args()
    for name in ("count", "window", "join"):
        if args.profile and args.profile != name:
            continue
        if args.profile:
            profiler = cProfile.Profile()
            profiler.runcall(run, name, args.records)
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(45)
            pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
        else:
            run(name, args.records)


if __name__ == "__main__":
    main()
