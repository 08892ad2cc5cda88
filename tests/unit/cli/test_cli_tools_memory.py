"""consume, topics describe/delete, groups and dlq replay on the memory broker (click's runner)."""
from __future__ import annotations

import sys
import uuid

import orjson
import pytest
from click.testing import CliRunner

from streamkit.cli.main import cli
from streamkit.transport.base import TP
from streamkit.transport.memory import MemoryBroker

APP_MODULE = '''
import streamkit as sk


class Order(sk.Record):
    item: str
    qty: int


app = sk.App("{name}", broker="memory://{name}", driver="memory", web_enabled=False, error_policy="dlq")
orders = app.topic("{name}-orders", value_type=Order, partitions=2)
counts = app.topic("{name}-counts", key_type=str, value_type=int)


@app.agent(orders)
async def handle(stream):
    async for _ in stream:
        pass
'''


@pytest.fixture
def app_module(tmp_path, monkeypatch):
    name = f"tools_{uuid.uuid4().hex[:6]}"
    (tmp_path / f"{name}.py").write_text(APP_MODULE.format(name=name))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)
    MemoryBroker.forget(name)


def invoke(*args: str, broker: str | None = None):
    """The CLI; ``broker``: the memory cluster the STREAMKIT_* settings name (no -A)."""
    env = {"STREAMKIT_BROKER": f"memory://{broker}", "STREAMKIT_DRIVER": "memory"} if broker else None
    return CliRunner().invoke(cli, list(args), env=env)


def append(name: str, topic: str, key, value, partition: int = 0, headers=None) -> None:
    broker = MemoryBroker.named(name)
    broker.create_topic(topic, 2)
    broker.append(topic, key, value, partition, headers or [], 1700000000000)


def test_consume_from_beginning_decodes_with_the_apps_types_and_stops_at_the_end(app_module):
    topic = f"{app_module}-orders"
    append(app_module, topic, b"k1", b'{"item":"tea","qty":2}', 0)
    append(app_module, topic, b"k2", b'{"item":"cake","qty":1}', 1, [("trace", b"abc"), ("bin", b"\xff\x00")])
    result = invoke("consume", topic, "-A", f"{app_module}:app", "--from-beginning", "--json")
    assert result.exit_code == 0, (result.output, result.stderr)
    lines = [orjson.loads(line) for line in result.stdout.splitlines()]
    assert sorted((r["partition"], r["offset"], r["key"]) for r in lines) == [(0, 0, "k1"), (1, 0, "k2")]
    second = next(r for r in lines if r["partition"] == 1)
    assert second["value"]["item"] == "cake" and second["value"]["qty"] == 1
    assert second["headers"] == [["trace", "abc"], ["bin", {"base64": "/wA="}]]
    assert second["timestamp_ms"] == 1700000000000 and second["timestamp"].startswith("2023-11-14T22:13:20.000")
    assert "2 records" in result.stderr


def test_consume_without_an_app_shows_text_or_base64_and_honours_partition_and_max(app_module):
    topic = f"{app_module}-raw"
    append(app_module, topic, b"a", b"hello", 0)
    append(app_module, topic, b"b", b"\xff\xfe", 0)
    append(app_module, topic, b"c", b"other", 1)
    result = invoke("consume", topic, "--from-beginning", "--partition", "0", broker=app_module)
    assert result.exit_code == 0, (result.output, result.stderr)
    lines = result.stdout.splitlines()
    assert len(lines) == 2 and "key=a  value=hello" in lines[0] and "value=base64://4=" in lines[1], lines
    limited = invoke("consume", topic, "--from-beginning", "--max", "1", "--json", broker=app_module)
    assert len(limited.stdout.splitlines()) == 1
    raw = orjson.loads(invoke("consume", topic, "--from-beginning", "--partition", "0", "--json",
                              broker=app_module).stdout.splitlines()[1])
    assert raw["value"] == "//4=" and raw["value_encoding"] == "base64" and raw["key_encoding"] == "utf-8"


def test_consume_refuses_a_topic_or_partition_that_does_not_exist(app_module):
    missing = invoke("consume", "nope", broker=app_module)
    assert missing.exit_code == 2 and "topic 'nope' does not exist" in missing.stderr
    append(app_module, f"{app_module}-x", None, b"1", 0)
    wrong = invoke("consume", f"{app_module}-x", "--partition", "5", broker=app_module)
    assert wrong.exit_code == 2 and "has partitions 0..1, not 5" in wrong.stderr


def test_consume_from_the_end_without_follow_shows_nothing_old(app_module):
    topic = f"{app_module}-orders"
    append(app_module, topic, b"k1", b'{"item":"tea","qty":2}', 0)
    result = invoke("consume", topic, "-A", f"{app_module}:app", "--no-follow")
    assert result.exit_code == 0 and result.stdout == "" and "0 records" in result.stderr


def test_topics_describe_shows_partitions_offsets_and_configs(app_module):
    topic = f"{app_module}-described"
    created = invoke("topics", "create", topic, "--partitions", "2", "--config", "retention.ms=1000", broker=app_module)
    assert created.exit_code == 0, created.stderr
    append(app_module, topic, b"a", b"1", 1)
    append(app_module, topic, b"b", b"2", 1)
    result = invoke("topics", "describe", topic, broker=app_module)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"{topic}\tpartitions=2\treplicas=1"
    assert lines[1] == "  partition=0\tleader=0\treplicas=0\tisr=0\tearliest=0\tlatest=0\trecords=0"
    assert lines[2] == "  partition=1\tleader=0\treplicas=0\tisr=0\tearliest=0\tlatest=2\trecords=2"
    assert lines[3:] == ["configs set on the topic:", "  retention.ms=1000"]


def test_topics_delete_asks_refuses_foreign_topics_and_reports_each(app_module):
    ours, other = f"{app_module}-counts", f"{app_module}-someone-elses"
    for name in (ours, other):
        append(app_module, name, None, b"1", 0)
    broker = MemoryBroker.named(app_module)
    declined = CliRunner().invoke(cli, ["topics", "delete", ours, "-A", f"{app_module}:app"], input="n\n")
    assert declined.exit_code == 1 and ours in broker.logs  # click's Abort
    foreign = invoke("topics", "delete", other, "-A", f"{app_module}:app", "--yes")
    assert foreign.exit_code == 2 and "not a topic of app" in foreign.stderr and "--force" in foreign.stderr
    assert other in broker.logs
    done = invoke("topics", "delete", ours, other, "nope", "-A", f"{app_module}:app", "--yes", "--force")
    assert done.stdout.splitlines() == [f"deleted {ours}", f"deleted {other}", "not deleted nope: does not exist"]
    assert done.exit_code == 1 and ours not in broker.logs and other not in broker.logs


def test_every_topics_subcommand_has_help():
    for sub in ("list", "create", "describe", "delete"):
        result = CliRunner().invoke(cli, ["topics", "--help"])
        line = next(line for line in result.output.splitlines() if line.strip().startswith(sub))
        assert len(line.split(None, 1)) == 2, (sub, line)


def test_groups_shows_the_apps_committed_offsets_ends_and_lag(app_module):
    topic = f"{app_module}-orders"
    for _offset in range(3):
        append(app_module, topic, None, b"{}", 0)
    append(app_module, topic, None, b"{}", 1)
    MemoryBroker.named(app_module).committed[app_module] = {TP(topic, 0): 1}
    result = invoke("groups", "-A", f"{app_module}:app")
    assert result.exit_code == 0, result.stderr
    lines = [line.split() for line in result.stdout.splitlines()]
    assert lines[0] == ["group", app_module] and lines[1] == ["TOPIC", "PARTITION", "COMMITTED", "END", "LAG"]
    assert lines[2:] == [[topic, "0", "1", "3", "2"], [topic, "1", "-", "1", "1"], ["total", "lag", "3"]]
    named = invoke("groups", "--group", app_module, broker=app_module)  # every partition of a topic it committed in
    assert [line.split() for line in named.stdout.splitlines()] == lines
    assert invoke("groups", broker=app_module).exit_code == 2


def dead_letter(app_module: str, source: str, partition: int, offset: int, error: str, error_type: str = "ValueError"):
    headers = [("trace", b"t1"), ("streamkit-error", error.encode()), ("streamkit-error-type", error_type.encode()),
               ("streamkit-stage", b"agent"), ("streamkit-source-topic", source.encode()),
               ("streamkit-source-partition", str(partition).encode()), ("streamkit-source-offset", str(offset).encode()),
               ("streamkit-app", app_module.encode())]
    append(app_module, f"{app_module}-dlq", f"k{offset}".encode(), f"v{offset}".encode(), 0, headers)


def test_dlq_replay_sends_the_selected_dead_letters_back_where_they_failed(app_module):
    orders, counts = f"{app_module}-orders", f"{app_module}-counts"
    MemoryBroker.named(app_module).create_topic(orders, 2)
    dead_letter(app_module, orders, 1, 10, "bad qty")      # dlq offset 0
    dead_letter(app_module, counts, 0, 11, "bad count")    # 1
    dead_letter(app_module, orders, 0, 12, "no item", "DecodeError")  # 2
    append(app_module, f"{app_module}-dlq", None, b"stray", 0)  # 3: not a dead letter
    dead_letter(app_module, orders, 1, 13, "bad qty")      # 4
    dry = invoke("dlq", "replay", "-A", f"{app_module}:app", "--source-topic", orders, "--dry-run")
    assert dry.exit_code == 0, dry.stderr
    assert len(dry.stdout.splitlines()) == 4 and f"-> {orders}[0] (was @12) DecodeError: no item" in dry.stdout
    assert dry.stdout.splitlines()[-1] == (f"would replay 3 dead letters from {app_module}-dlq; skipped 1 filtered; "
                                           "skipped 1 not a dead letter")
    broker = MemoryBroker.named(app_module)
    assert all(not log for log in broker.logs[orders])  # a dry run sends nothing
    done = invoke("dlq", "replay", "-A", f"{app_module}:app", "--error", "bad qty", "--to-offset", "3")
    assert done.exit_code == 0, done.stderr
    assert done.stdout.strip() == (f"replayed 1 dead letters from {app_module}-dlq; skipped 2 filtered; "
                                   "skipped 1 after --to-offset; skipped 1 not a dead letter")
    [record] = broker.logs[orders][1]
    assert (record.key, record.value) == (b"k10", b"v10")
    assert record.headers == [("trace", b"t1"), ("streamkit-replay-of", f"{app_module}-dlq[0]@0".encode())]
    again = invoke("dlq", "replay", "-A", f"{app_module}:app", "--error", "DecodeError", "--from-offset", "2")
    assert again.stdout.startswith("replayed 1 dead letters") and len(broker.logs[orders][0]) == 1
