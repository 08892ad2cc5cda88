"""A Faust deployment taken over by streamkit with the same app id (docs/migrating-from-faust.md,
'Faust's table state'): faust-streaming 0.15.3 runs Faust's tumbling example until its windowed
table's changelog holds records, stops, and the same example under streamkit (the import
changed, the app id the same) refuses to restore them: it halts, naming the table, the changelog
and the key, and its agent processes no record. Runs on Apache Kafka (``STREAMKIT_TEST_BROKER``),
as the side-by-side tests do."""
from __future__ import annotations

import os

import pytest

from tests.faust_apps.side_by_side import Side, create_topics, read
from tests.helpers import wait_until

pytestmark = pytest.mark.skipif(not os.environ.get("STREAMKIT_TEST_BROKER"),
                                reason="faust-streaming runs on Apache Kafka: set STREAMKIT_TEST_BROKER=host:port")


def test_streamkit_refuses_the_windowed_changelog_a_faust_app_left(broker_address, tmp_path, unique):
    app_id, topic = f"takeover-{unique}", f"tumbling_topic-{unique}"
    changelog = f"{app_id}-tumbling_table-changelog"
    create_topics(broker_address, {topic: 8})  # Faust's default topic_partitions
    names = {"windowing": app_id, "tumbling_topic": topic}  # the same id on both sides

    faust = Side("faust", "tumbling", broker_address, tmp_path / "faust", names)
    faust.start()
    try:
        wait_until(lambda: len(read(broker_address, changelog)) >= 3, 120, "Faust's windowed table changelog")
    finally:
        faust.stop()
    faust_keys = [m.key() for m in read(broker_address, changelog)]
    assert all(key.startswith(b'["counter",[') for key in faust_keys), faust_keys[:3]

    streamkit = Side("streamkit", "tumbling", broker_address, tmp_path / "streamkit", names)
    worker = streamkit.start()
    try:
        code = worker.process.wait(90)
    finally:
        worker.stop()
    output = worker.output()
    assert code != 0, output[-4000:]
    [refusal] = [line for line in worker.lines if "worker halting" in line and "cannot be restored" in line]
    assert "'tumbling_table'" in refusal and changelog in refusal and '["counter",[' in refusal, refusal
    assert "docs/migrating-from-faust.md" in refusal, refusal
    # the refusal is the marker that the restore ran; the example prints a line per record processed
    assert "-- New Event" not in output, output[-4000:]
    print(f"\nstreamkit exited {code}: {refusal}")
