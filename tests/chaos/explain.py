"""What a failed chaos run leaves to read: which outputs came twice or never, and who wrote them.

A summary line says *how many* outputs were duplicated or missing; the cause shows in *which*
copies they were. For each duplicated output: every copy's partition, offset and timestamp and,
given the broker's log directory (a broker started by real-kafka.sh), the batch each copy is in
(producer id and epoch, transactional or not) read by ``kafka-dump-log.sh``: two copies from
one producer epoch point at a send that joined the wrong transaction, two epochs at a unit redone
after a rollback or by the next owner. For missing outputs: the first few sequence numbers.
"""
from __future__ import annotations

import re
import subprocess
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

SHOWN = 10  # duplicates and missing numbers listed; the rest counted

_BATCH = re.compile(r"baseOffset: (\d+) lastOffset: (\d+) .*?producerId: (-?\d+) producerEpoch: (-?\d+) "
                    r".*?isTransactional: (\w+)")


@dataclass(frozen=True)
class LogBatch:
    """One record batch of a partition's log, as kafka-dump-log.sh prints its header."""

    first: int
    last: int
    producer_id: int
    producer_epoch: int
    transactional: bool

    def describe(self) -> str:
        kind = "transactional" if self.transactional else "plain"
        return (f"batch {self.first}-{self.last} ({kind}, producer {self.producer_id} "
                f"epoch {self.producer_epoch})")


def parse_dump(text: str) -> list[LogBatch]:
    """The batch headers of ``kafka-dump-log.sh --files <segment>`` output (record lines ignored)."""
    return [LogBatch(int(m[1]), int(m[2]), int(m[3]), int(m[4]), m[5] == "true") for m in _BATCH.finditer(text)]


def log_batches(kafka_dir: Path, log_dir: Path, topic: str, partition: int) -> list[LogBatch]:
    """Every batch of ``topic[partition]`` in the broker's log directory (all its segments)."""
    tool = kafka_dir / "bin" / "kafka-dump-log.sh"
    segments = sorted((log_dir / f"{topic}-{partition}").glob("*.log"))
    if not segments or not tool.exists():
        return []
    done = subprocess.run([str(tool), "--files", ",".join(map(str, segments))], capture_output=True, text=True,
                          timeout=300, check=False)
    return parse_dump(done.stdout)


def batch_of(batches: list[LogBatch], offset: int) -> LogBatch | None:
    return next((b for b in batches if b.first <= offset <= b.last), None)


def explain(records: Iterable[Any], expected: int, *, topic: str | None = None, kafka_dir: Path | None = None,
            log_dir: Path | None = None) -> list[str]:
    """Lines naming the duplicated and missing outputs of a run whose output values are the
    sequence numbers ``0..expected-1`` (``records``: confluent-kafka messages). With
    ``kafka_dir`` and ``log_dir`` (and ``topic``), each duplicate's copies name their batch."""
    copies: dict[int, list[Any]] = defaultdict(list)
    for message in records:
        copies[int(message.value())].append(message)
    duplicated = {value: found for value, found in copies.items() if len(found) > 1}
    missing = sorted(set(range(expected)) - set(copies))
    lines: list[str] = []
    batches: dict[int, list[LogBatch]] = {}
    if duplicated:
        extra = sum(len(found) - 1 for found in duplicated.values())
        lines.append(
            f"duplicated: {len(duplicated)} outputs, {extra} extra copies; the first {min(SHOWN, len(duplicated))}:"
        )
        for value in sorted(duplicated)[:SHOWN]:
            described = []
            for message in sorted(duplicated[value], key=lambda m: (m.partition(), m.offset())):
                where = f"[{message.partition()}]@{message.offset()} t={message.timestamp()[1]}"
                if kafka_dir is not None and log_dir is not None and topic is not None:
                    if message.partition() not in batches:
                        batches[message.partition()] = log_batches(kafka_dir, log_dir, topic, message.partition())
                    batch = batch_of(batches[message.partition()], message.offset())
                    where += f" {batch.describe()}" if batch is not None else " (batch not found)"
                described.append(where)
            lines.append(f"  {value}: " + "; ".join(described))
    if missing:
        shown = ", ".join(map(str, missing[:SHOWN]))
        lines.append(f"missing: {len(missing)} outputs, the first: {shown}")
    return lines
