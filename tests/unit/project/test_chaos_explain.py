"""The chaos harness's explanation of a failed run (tests/chaos/explain.py)."""
from pathlib import Path

from tests.chaos.explain import LogBatch, batch_of, explain, parse_dump

DUMP = """Dumping /k/data-29192/logs/chaos-out-1-5/00000000000000000000.log
Log starting offset: 0
baseOffset: 0 lastOffset: 751 count: 752 baseSequence: 0 lastSequence: 751 producerId: 7 producerEpoch: 1 partitionLeaderEpoch: 0 isTransactional: true isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1795762075006 size: 71 magic: 2 compresscodec: none crc: 3874613690 isvalid: true
baseOffset: 752 lastOffset: 752 count: 1 baseSequence: 0 lastSequence: 0 producerId: 7 producerEpoch: 2 partitionLeaderEpoch: 0 isTransactional: true isControl: false deleteHorizonMs: OptionalLong.empty position: 71 CreateTime: 1795762075063 size: 70 magic: 2 compresscodec: none crc: 1414207646 isvalid: true
| offset: 752 CreateTime: 1795762075063 keySize: 4 valueSize: 4 sequence: 0 headerKeys: [] key: k1 payload: 5000
baseOffset: 753 lastOffset: 753 count: 1 baseSequence: -1 lastSequence: -1 producerId: 7 producerEpoch: 2 partitionLeaderEpoch: 0 isTransactional: true isControl: true deleteHorizonMs: OptionalLong.empty position: 141 CreateTime: 1795762075064 size: 78 magic: 2 compresscodec: none crc: 1 isvalid: true
"""  # noqa: E501 - verbatim kafka-dump-log output


class Message:
    def __init__(self, value, partition, offset, ts=1000):
        self._v, self._p, self._o, self._t = str(value).encode(), partition, offset, ts

    def value(self):
        return self._v

    def partition(self):
        return self._p

    def offset(self):
        return self._o

    def timestamp(self):
        return (1, self._t)


def test_the_dump_tools_batch_headers_are_read_and_record_lines_skipped():
    batches = parse_dump(DUMP)
    assert batches == [LogBatch(0, 751, 7, 1, True), LogBatch(752, 752, 7, 2, True), LogBatch(753, 753, 7, 2, True)]
    assert batch_of(batches, 500) == batches[0] and batch_of(batches, 752) == batches[1]
    assert batch_of(batches, 900) is None


def test_duplicates_and_missing_outputs_are_named_with_where_each_copy_is():
    records = [Message(0, 5, 10), Message(1, 5, 11), Message(1, 2, 40, ts=2000), Message(3, 1, 7)]
    lines = explain(records, 4)
    assert lines[0] == "duplicated: 1 outputs, 1 extra copies; the first 1:"
    assert lines[1] == "  1: [2]@40 t=2000; [5]@11 t=1000"
    assert lines[2] == "missing: 1 outputs, the first: 2"
    assert explain([Message(0, 0, 0), Message(1, 0, 1)], 2) == []  # nothing to explain


def test_with_the_brokers_log_each_copy_names_its_batch(tmp_path):
    kafka, logs = tmp_path / "kafka", tmp_path / "logs"
    (kafka / "bin").mkdir(parents=True)
    segment = logs / "out-5" / "00000000000000000000.log"
    segment.parent.mkdir(parents=True)
    segment.write_bytes(b"")
    tool = kafka / "bin" / "kafka-dump-log.sh"
    (tmp_path / "dump.txt").write_text(DUMP)
    tool.write_text(f"#!/bin/sh\ncat {tmp_path / 'dump.txt'}\n")
    tool.chmod(0o755)
    lines = explain([Message(5000, 5, 700), Message(5000, 5, 752)], 5001, topic="out", kafka_dir=Path(kafka),
                    log_dir=Path(logs))
    assert lines[1] == ("  5000: [5]@700 t=1000 batch 0-751 (transactional, producer 7 epoch 1); "
                        "[5]@752 t=1000 batch 752-752 (transactional, producer 7 epoch 2)")
