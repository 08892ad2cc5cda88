"""Faust apps run on streamkit as their users run them: ``python app.py worker``, settings from
Faust's environment variables (``BROKER_URL``), nothing declared that Faust users do not declare.
Where records cross between the two, faust-streaming itself writes or reads them."""
from __future__ import annotations

import json
import subprocess
from collections import Counter
from datetime import datetime, timedelta, timezone

import orjson
from confluent_kafka import Producer

from streamkit.testing import read_topic
from streamkit.transport.partitioner import partition_for_key
from tests.faust_apps import word_count
from tests.faust_apps.faust_env import APPS, faust_python
from tests.faust_apps.worker import AppWorker, run_command
from tests.helpers import wait_until


def ready(worker: AppWorker) -> None:
    wait_until(lambda: worker.get("/ready")[0] == 200, 90, f"the worker on port {worker.port} to be ready")


def test_word_count_counts_every_word_and_serves_counts(broker_address, tmp_path, unique):
    worker = AppWorker("word_count", broker_address, tmp_path / "worker")
    try:
        ready(worker)
        produced = run_command("word_count", broker_address, tmp_path, "produce", "--tag", unique)
        assert produced.returncode == 0 and "sent 3 sentences" in produced.stdout, produced.stderr[-2000:]
        expected = Counter(word + unique for sentence in word_count.SENTENCES for word in sentence.split())

        def served():
            return {word: worker.get(f"/count/{word}/")[1] for word in expected}

        wait_until(lambda: served() == {word: {word: n} for word, n in expected.items()}, 60,
                   "every word's count served at /count/<word>/")
        assert expected["the" + unique] == 3
        # the app's sensor heard each event its agents took: 3 posts and their 16 words
        assert worker.get("/sensor/") == (200, {"events": 3 + sum(expected.values())})
    finally:
        assert worker.stop() == 0


def test_withdrawals_from_a_faust_producer_are_windowed_and_read_back_by_faust(broker_address, tmp_path, unique):
    start = datetime(2026, 1, 1, 10, 0, tzinfo=timezone.utc)
    # One user per country, each country on its own partition of the re-keyed stream, so every
    # country's records reach its windows in time order. (Interleaved, a country's record can
    # be behind the stream time another country advanced: late, dropped with a warning, where
    # Faust would count it; the Faust app then declares grace=: docs/migrating-from-faust.md.)
    countries = distinct_partitions([f"c{n}-{unique}" for n in range(40)], 3)
    rows = [{"user": f"u{i % 3}-{unique}", "country": countries[i % 3], "amount": float(i + 1),
             "date": (start + timedelta(minutes=20 * i)).isoformat()} for i in range(12)]
    # A new app version per run (Faust's APP_VERSION: a new consumer group and new tables), reading
    # only what is sent from now on, as a redeployed Faust app would: runs on a broker that keeps
    # earlier runs' records do not see those records' (same) event times as their stream time.
    worker = AppWorker("withdrawals", broker_address, tmp_path / "worker", APP_VERSION=str(int(unique, 16) % 10**6 + 2),
                       CONSUMER_AUTO_OFFSET_RESET="latest")
    try:
        ready(worker)
        faust_producer = subprocess.run(
            [str(faust_python()), str(APPS / "faust_side" / "produce_withdrawals.py"), broker_address, "withdrawals"],
            input="\n".join(json.dumps(r) for r in rows), capture_output=True, text=True, timeout=120)
        assert "faust sent 12" in faust_producer.stdout, faust_producer.stderr[-3000:]
        totals = read_mine(broker_address, "withdrawal-totals", unique, expect=12)
        countries = read_mine(broker_address, "withdrawal-country-totals", unique, expect=12)
    finally:
        assert worker.stop() == 0, worker.output()[-5000:]

    # each total is the user's sum so far in the record's hour (tumbling 3600, relative to the field)
    hour = lambda r: datetime.fromisoformat(r["date"]).timestamp() // 3600 * 3600  # noqa: E731
    expected_totals = []
    for i, row in enumerate(rows):
        same = [r["amount"] for r in rows[:i + 1] if r["user"] == row["user"] and hour(r) == hour(row)]
        expected_totals.append({"class": "Total", "user": row["user"], "total": sum(same)})
    # Faust decodes what streamkit wrote, declared as Total and untyped (the blessed key names it)
    decoded = subprocess.run([str(faust_python()), str(APPS / "faust_side" / "decode_totals.py")],
                             input="\n".join(m.value().hex() for m in totals), capture_output=True, text=True,
                             timeout=120)
    assert decoded.returncode == 0, decoded.stderr[-3000:]
    seen = [json.loads(line) for line in decoded.stdout.splitlines()]
    assert len(seen) == 24 and seen[0::2] == seen[1::2]  # the same either way
    by_user = lambda items: sorted(items, key=lambda t: (t["user"], t["total"]))  # noqa: E731
    assert by_user(seen[0::2]) == by_user(expected_totals)

    # the country agent re-keys by Withdrawal.country (group_by a field) into a hopping table:
    # current() is the latest window holding the record's time, [hour, hour + 7200)
    last_by_country = {m.key().decode(): orjson.loads(m.value()) for m in countries}
    # every checkpoint committed: nothing went through twice (a dropped topic's metadata once failed
    # the first one, about 1 run in 3: keep_in_metadata in transport/aiokafka_batches.py)
    assert not [line for line in worker.lines if "checkpoint did not commit" in line]
    for country in {r["country"] for r in rows}:
        mine = [r for r in rows if r["country"] == country]
        expected = sum(r["amount"] for r in mine if hour(r) == hour(mine[-1]))
        assert last_by_country[country] == expected


def distinct_partitions(keys, n, partitions=4):
    """``n`` of ``keys`` that land on different partitions (Kafka's default partitioner)."""
    chosen, used = [], set()
    for key in keys:
        partition = partition_for_key(key.encode(), partitions)
        if partition not in used:
            chosen.append(key)
            used.add(partition)
    assert len(chosen) >= n, f"only {len(chosen)} of the keys on distinct partitions"
    return chosen[:n]


def read_mine(broker, topic, unique, expect, timeout=60):
    """This run's records of ``topic`` (keys carry the run's tag) once ``expect`` are there, in
    offset order per partition; fails at the deadline."""
    found = []

    def arrived():
        found[:] = [m for m in read_topic(broker, topic, timeout=20, to_end=True)
                    if m.key() is not None and m.key().decode().endswith(unique)]
        return len(found) >= expect

    wait_until(arrived, timeout, f"{expect} records of this run in {topic}")
    return sorted(found, key=lambda m: (m.partition(), m.offset()))


def test_timers_crontab_tasks_a_service_and_a_channel(broker_address, tmp_path, unique):
    worker = AppWorker("scheduling", broker_address, tmp_path / "worker", RUN_TAG=unique)
    try:
        worker.wait_for_line("SERVICE started")
        worker.wait_for_line("SERVICE background task ran")
        worker.wait_for_line("TASK fed the channel")
        worker.wait_for_line("LEADER TASK is_leader=True")
        shouted = worker.wait_for_line("SHOUTED ", times=3)
        assert shouted == [f"SHOUTED {w}{unique}".upper() for w in ("alpha", "beta", "gamma")]
        worker.wait_for_line("TIMER tick", times=3)
        worker.wait_for_line("LEADER TIMER tick", times=2)
        worker.wait_for_line("CRONTAB fired", times=2, timeout=20)
    finally:
        code = worker.stop()
    assert code == 0, worker.output()[-3000:]
    assert worker.count("SERVICE stopped") == 1 and worker.count("SIGNAL on_before_shutdown") == 1
    sent = [orjson.loads(m.value()) for m in read_topic(broker_address, "scheduling-shouted", timeout=30, to_end=True)]
    # keyless records spread over the topic's partitions: compared as a multiset
    assert Counter(s for s in sent if s.endswith(unique.upper())) == Counter(
        f"{w}{unique}".upper() for w in ("alpha", "beta", "gamma"))


def holdings(worker: AppWorker) -> set[int]:
    """The partitions a worker holds now, replayed from its ASSIGNED/REVOKED lines."""
    held: set[int] = set()
    for line in list(worker.lines):
        if line.startswith(("ASSIGNED ", "REVOKED ")):
            parts = set(json.loads(line.split(" ", 1)[1]))
            held = held | parts if line.startswith("ASSIGNED") else held - parts
    return held


def test_rebalance_signals_on_two_workers(broker_address, tmp_path, unique):
    first = AppWorker("signals", broker_address, tmp_path / "first")
    second = None
    try:
        first.wait_for_line("WORKER init")
        first.wait_for_line("REBALANCE complete")
        wait_until(lambda: holdings(first) == {0, 1, 2, 3}, 60, "the first worker to hold all four partitions")
        second = AppWorker("signals", broker_address, tmp_path / "second")
        second.wait_for_line("ASSIGNED ", timeout=90)
        wait_until(lambda: holdings(first) | holdings(second) == {0, 1, 2, 3}
                   and not holdings(first) & holdings(second) and holdings(second), 90,
                   "the two workers to split the partitions")
        assert first.count("REVOKED ") >= 1

        producer = Producer({"bootstrap.servers": broker_address})
        values = [f"e{i}-{unique}" for i in range(8)]
        for i, value in enumerate(values):
            producer.produce("signal-events", key=f"k{i}".encode(), value=orjson.dumps(value))
        assert producer.flush(30) == 0
        got = lambda: Counter(line[4:] for w in (first, second) for line in list(w.lines)  # noqa: E731
                              if line.startswith("GOT ") and line.endswith(unique))
        wait_until(lambda: set(got()) == set(values), 60, "every event consumed")
        assert got() == Counter(values)  # once each

        assert second.stop() == 0
        wait_until(lambda: holdings(first) == {0, 1, 2, 3}, 90, "the first worker to take all partitions back")
    finally:
        if second is not None:
            second.stop()
        assert first.stop() == 0
