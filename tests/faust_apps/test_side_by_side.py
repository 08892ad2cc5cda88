"""Faust's windowed, set-table and channel examples side by side on Apache Kafka: the same input
through faust-streaming 0.15.3 and through streamkit, the results compared (side_by_side.py says
how each is run and read). Runs only against a real Kafka (``STREAMKIT_TEST_BROKER``): the dev
broker is not what faust-streaming's users run it on.

Each test prints its figures (``-s`` shows them); docs/migrating-from-faust.md keeps the last run's."""
from __future__ import annotations

import json
import os
import re
import time
from collections import Counter
from typing import Any

import pytest

from streamkit.transport.partitioner import partition_for_key
from tests.faust_apps.side_by_side import (
    SIDES,
    Side,
    create_topics,
    produce,
    read,
    set_contents,
    settle,
    truth_by_window,
    window_counts,
)
from tests.helpers import wait_until

pytestmark = pytest.mark.skipif(not os.environ.get("STREAMKIT_TEST_BROKER"),
                                reason="side by side with faust-streaming runs on Apache Kafka: "
                                       "set STREAMKIT_TEST_BROKER=host:port")


def figures(example: str, **found: Any) -> None:
    print(f"\nSIDE-BY-SIDE {example}: " + json.dumps(found, default=str, sort_keys=True))


def stop_all(sides: list[Side]) -> None:
    problems = []
    for side in sides:
        try:
            side.stop()
        except AssertionError as exc:
            problems.append(str(exc))
    assert not problems, "\n\n".join(problems)


PRINTED_CURRENT = re.compile(r"current\(\) should [^:]*: \d+\s*$")


@pytest.mark.parametrize(("example", "size", "step"), [("tumbling", 10, 10), ("hopping", 10, 5)])
def test_windowing_example_counts_as_faust_does(example, size, step, broker_address, tmp_path, unique):
    topic, table = f"{example}_topic-{unique}", f"{example}_table"
    create_topics(broker_address, {topic: 8})  # Faust's default topic_partitions
    # the same records for both, first in every partition: 4, 7 and 2 in three windows two minutes ago
    now = time.time()
    base = now - now % size - 120
    fixed = [base + 0.5 + i * 10 / n + w * size for w, n in enumerate((4, 7, 2)) for i in range(n)]
    produce(broker_address, topic, ({"value": b'{"random": 0.5}', "partition": i % 8, "timestamp": int(ts * 1000)}
                                    for i, ts in enumerate(fixed)))
    expected_fixed = truth_by_window(fixed, size, step)
    sides = [Side(s, example, broker_address, tmp_path / s,
                  {"windowing": f"windowing-{s}-{unique}", f"{example}_topic": topic}) for s in SIDES]
    changelog = {s.name: f"windowing-{s.name}-{unique}-{table}-changelog" for s in sides}
    counts = lambda side: window_counts(side.name, read(broker_address, changelog[side.name]))  # noqa: E731
    try:
        for side in sides:
            side.start()
        for side in sides:
            wait_until(lambda: all(counts(side).get(w) == n for w, n in expected_fixed.items()),  # noqa: B023
                       120, f"{side.name} to count the fixed records")
            print(f"{side.name} counted the fixed records at {time.time() - now:.1f} s")
        # the timers' records (both write every 2 s to the shared topic): compare every window
        # before a cut both sides have passed
        cut = time.time() // size * size + size
        for side in sides:
            wait_until(lambda: any(w >= cut for w in counts(side)), 60, f"{side.name} to pass {cut}")  # noqa: B023
            print(f"{side.name} passed the cut at {time.time() - now:.1f} s")
    finally:
        stop_all(sides)
    result = {s.name: {w: n for w, n in counts(s).items() if w + size <= cut} for s in sides}
    truth = truth_by_window((m.timestamp()[1] / 1000 for m in read(broker_address, topic)), size, step)
    truth = {w: n for w, n in truth.items() if w + size <= cut}
    # what the example prints: the count it just wrote. Faust's memory store is one dict for the
    # worker, so it prints the worker-wide count; streamkit prints the count in the record's
    # partition (docs/migrating-from-faust.md, "Side by side on Apache Kafka")
    printed = {s.name: [int(line.rsplit(":", 1)[1]) for line in s.lines(PRINTED_CURRENT)] for s in sides}
    figures(example, records=sum(truth.values()) // (size // step), windows=len(truth),
            faust=list(result["faust"].values()), streamkit=list(result["streamkit"].values()),
            truth=list(truth.values()), equal=result["faust"] == result["streamkit"] == truth,
            printed_current_max={side: max(values) for side, values in printed.items()},
            printed_lines={side: len(values) for side, values in printed.items()})
    assert result["faust"] == truth, "faust-streaming did not count every record"
    assert result["streamkit"] == result["faust"]
    # the same windows, one count worker-wide, the other one partition's: the fixed records of a
    # window are spread over 8 partitions, so Faust's printed count goes higher
    assert max(printed["faust"]) > max(printed["streamkit"])


def aggregates(broker: str, sink: str) -> dict[float, list[tuple[int, float]]]:
    """{window start: [(count, mean), ...]} as the example's on_window_close sent them."""
    found: dict[float, list[tuple[int, float]]] = {}
    for m in read(broker, sink):
        agg = json.loads(m.value())
        found.setdefault(float(agg["date"]), []).append((agg["count"], agg["mean"]))
    return dict(sorted(found.items()))


def test_windowed_aggregation_sends_faust_aggregates(broker_address, tmp_path, unique):
    source = f"raw-event-{unique}"
    create_topics(broker_address, {source: 1})
    sides = [Side(s, "windowed_aggregation", broker_address, tmp_path / s,
                  {"raw-event": source, "agg-event": f"agg-event-{s}-{unique}",
                   "windowed-agg": f"windowed-agg-{s}-{unique}"}) for s in SIDES]
    sink = {s.name: f"agg-event-{s.name}-{unique}" for s in sides}
    try:
        for side in sides:
            side.start()
        started = time.time()
        first_full = started - started % 10 + 10  # the first window both sides read from its start
        common = lambda: set.intersection(*(set(aggregates(broker_address, sink[s.name])) for s in sides))  # noqa: E731
        wait_until(lambda: any(w >= first_full + 10 for w in common()), 90,
                   "both sides to send the aggregates of two whole windows")
    finally:
        stop_all(sides)
    result = {s.name: aggregates(broker_address, sink[s.name]) for s in sides}
    windows = sorted(set(result["faust"]) & set(result["streamkit"]))
    raw = [json.loads(m.value()) for m in read(broker_address, source)]
    truth = Counter(r["date"] - r["date"] % 10 for r in raw)
    figures("windowed_aggregation", windows=windows, records=len(raw),
            faust={w: result["faust"][w] for w in windows}, streamkit={w: result["streamkit"][w] for w in windows},
            truth={w: truth[w] for w in windows},
            only_faust={w: v for w, v in result["faust"].items() if w not in windows},
            only_streamkit={w: v for w, v in result["streamkit"].items() if w not in windows})
    for w in windows:
        (f_count, f_mean), = result["faust"][w]
        (s_count, s_mean), = result["streamkit"][w]
        assert s_count == f_count and s_mean == pytest.approx(f_mean), w
        if w >= first_full:
            assert f_count == truth[w], w


def test_tableofset_holds_faust_sets(broker_address, tmp_path, unique):
    joining, leaving = f"people_joining2-{unique}", f"people_leaving2-{unique}"
    create_topics(broker_address, {joining: 4, leaving: 4})
    sides = [Side(s, "tableofset", broker_address, tmp_path / s,
                  {"people_joining2": joining, "people_leaving2": leaving,
                   "table-of-sets-windowed": f"table-of-sets-windowed-{s}-{unique}"}) for s in SIDES]
    changelog = {s.name: f"table-of-sets-windowed-{s.name}-{unique}-v2-people-changelog" for s in sides}
    table = lambda side: set_contents(side.name, read(broker_address, changelog[side.name]))  # noqa: E731

    def send(topic: str, pairs: list[tuple[str, str]]) -> None:
        # as the example's commands send them: the key as text, the name a JSON string (Faust's
        # default value serializer), in the partition Kafka's partitioner gives the key
        produce(broker_address, topic, ({"key": loc.encode(), "value": json.dumps(name).encode(),
                                         "partition": partition_for_key(loc.encode(), 4)} for loc, name in pairs))

    oslo, rome, lima = (f"{city}-{unique}" for city in ("oslo", "rome", "lima"))
    joins = [(oslo, "alice"), (oslo, "bob"), (rome, "carol"), (oslo, "dave"), (lima, "erin"), (lima, "frank")]
    leaves = [(oslo, "alice"), (lima, "erin"), (lima, "frank"), (rome, "zoe")]
    after_joins = {oslo: {"alice", "bob", "dave"}, rome: {"carol"}, lima: {"erin", "frank"}}
    after_leaves = {oslo: {"bob", "dave"}, rome: {"carol"}, lima: set()}
    result: dict[str, Any] = {}
    try:
        for side in sides:
            side.start()
        send(joining, joins)
        for side in sides:
            result[f"{side.name}_after_joins"] = settle(lambda: table(side), lambda t: t == after_joins, 120,  # noqa: B023
                                                        f"{side.name} to hold the joins")
        send(leaving, leaves)
        for side in sides:
            result[side.name] = settle(lambda: table(side), lambda t: t == after_leaves, 60,  # noqa: B023
                                       f"{side.name} to hold the leaves")
    finally:
        stop_all(sides)
    figures("tableofset", **{k: {loc.rsplit("-", 1)[0]: sorted(v) for loc, v in t.items()} for k, t in result.items()})
    assert result["streamkit"] == result["faust"] == after_leaves


ARRIVED = re.compile(r"\[(stage1|stage2)\] action arrived: .*device_id=(\d+)")
DEAD = re.compile(r"\[dead letter\] arrived: .*stage='(stage1|stage2)'.*device_id=(\d+)")


def tally(side: Side) -> dict[str, int]:
    """How many actions reached stage 1 / stage 2, and were dead-lettered by each, per the log;
    a round is the timer's ids 0..n-1, so its count is how often id 0 came to stage 1."""
    found: Counter[str] = Counter()
    zeros = 0
    for line in side.lines(re.compile(r"action arrived|dead letter\] arrived")):
        if m := ARRIVED.search(line) or DEAD.search(line):
            where = m[1] if m.re is ARRIVED else "dead_" + m[1]
            found[where] += 1
            zeros += where in ("stage1", "dead_stage1") and m[2] == "0"
    return {"rounds": zeros, **{k: found[k] for k in ("stage1", "dead_stage1", "stage2", "dead_stage2")}}


def bound_agent_rounds(name: str, broker: str, tmp_path: Any, unique: str) -> dict[str, int]:
    """Workers of one side, each until its rounds are through both stages, until stage 1 passed
    actions on through its channel sink. A round's fate is the wall-clock second it runs in
    (the example fails stage 1 at ``now % 3 == 0``, stage 2 at ``== 1``), and a 3 s timer keeps a
    worker's phase: a worker whose rounds all failed at stage 1 is followed by another, started
    a second later in the cycle."""
    side = Side(name, "bound_agent", broker, tmp_path / name, {"bound_agent": f"bound_agent-{name}-{unique}"})
    totals: Counter[str] = Counter()
    try:
        for _attempt in range(5):
            worker = side.start()
            totals.update(settle(lambda: tally(side), lambda t: t["rounds"] >= 1  # noqa: B023
                                 and t["stage1"] == t["stage2"] + t["dead_stage2"], 60, f"{name}: a round through"))
            totals["workers"] += 1
            worker.stop()
            if totals["stage1"]:
                break
            shifted = time.time() + 1
            wait_until(lambda: time.time() >= shifted, 5, "a second later", interval=0.01)  # noqa: B023
    finally:
        side.stop()
    return dict(totals)


def test_bound_agent_delivers_through_channels_as_faust(broker_address, tmp_path, unique):
    result = {name: bound_agent_rounds(name, broker_address, tmp_path, unique) for name in SIDES}
    figures("bound_agent", **result)
    for name, t in result.items():
        # every action stage 1 passed on reached stage 2 through the channel sink, once
        assert t["stage1"] == t["stage2"] + t["dead_stage2"], (name, t)
        assert t["stage1"] > 0, (name, t)
