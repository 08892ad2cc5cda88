"""``streamkit send`` takes Faust's forms (``send @agent VALUE``, ``send TOPIC VALUE``, ``-k``,
``-K``/``-V``, ``--repeat``) and records from a file or stdin, through one producer."""
from __future__ import annotations

import sys
import uuid

import orjson
import pytest
from click.testing import CliRunner

from streamkit.cli.main import cli
from streamkit.transport.memory import MemoryBroker, MemoryDriver

APP_MODULE = '''
import streamkit as faust

app = faust.App("{name}", broker="memory://{name}", driver="memory", web_enabled=False, topic_partitions=4)


class Order(faust.Record):
    account: str
    amount: int


orders = app.topic("{name}-orders", key_type=str, value_type=Order)
raw = app.topic("{name}-raw")


@app.agent(orders)
async def order(stream):
    async for _ in stream:
        pass


@app.agent(value_type=int)
async def tally(stream):
    async for _ in stream:
        pass
'''


@pytest.fixture
def app_module(tmp_path, monkeypatch):
    name = f"send_forms_{uuid.uuid4().hex[:6]}"
    (tmp_path / f"{name}.py").write_text(APP_MODULE.format(name=name))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)
    MemoryBroker.forget(name)


def send(name: str, *args: str, input: str | None = None):
    return CliRunner().invoke(cli, ["send", "-A", f"{name}:app", *args], input=input)


def records(name: str, topic: str) -> list:
    logs = MemoryBroker.named(name).logs.get(topic, [])
    return sorted((m for part in logs for m in part), key=lambda m: (m.timestamp_ms, m.partition, m.offset))


def test_send_at_agent_with_a_positional_value_as_faust(app_module):
    result = send(app_module, "@order", '{"account": "a1", "amount": 3}', "-k", "a1")
    assert result.exit_code == 0, result.output
    assert f"sent to {app_module}-orders (agent order)" in result.output, result.output
    [message] = records(app_module, f"{app_module}-orders")
    assert message.key == b"a1" and orjson.loads(message.value)["amount"] == 3
    assert "@order" not in MemoryBroker.named(app_module).logs


def test_send_at_agent_without_a_topic_goes_to_its_faust_named_topic(app_module):
    result = send(app_module, "@tally", "5")
    assert result.exit_code == 0, result.output
    [message] = records(app_module, f"{app_module}-{app_module}.tally")
    assert message.value == b"5"
    # Faust's @ takes the agent's full name too
    assert send(app_module, f"@{app_module}.tally", "6").exit_code == 0
    assert [m.value for m in records(app_module, f"{app_module}-{app_module}.tally")] == [b"5", b"6"]


def test_an_unknown_agent_is_refused_and_creates_nothing(app_module):
    result = send(app_module, "@ordr", '{"account": "a1", "amount": 3}')
    assert result.exit_code == 2, result.output
    assert "did you mean '@order'" in result.output, result.output
    logs = MemoryBroker.named(app_module).logs
    assert not any("ordr" in topic for topic in logs), sorted(logs)


def test_send_topic_value_repeat_partition_timestamp_headers(app_module):
    result = send(app_module, f"{app_module}-orders", '{"account": "a2", "amount": 1}', "--key", "a2",
                  "--partition", "2", "--repeat", "3", "--timestamp", "1700000000.5", "--header", "trace=abc",
                  "--header", "x=1=2")
    assert result.exit_code == 0, result.output
    sent = records(app_module, f"{app_module}-orders")
    assert [(m.partition, m.offset, m.key) for m in sent] == [(2, 0, b"a2"), (2, 1, b"a2"), (2, 2, b"a2")]
    assert {m.timestamp_ms for m in sent} == {1700000000500}
    assert sent[0].headers == [("trace", b"abc"), ("x", b"1=2")]
    assert "sent 3 records to" in result.output, result.output


def test_value_option_still_works_and_both_forms_are_refused(app_module):
    assert send(app_module, "tally", "--value", "7").exit_code == 0
    both = send(app_module, "tally", "8", "--value", "7")
    assert both.exit_code == 2 and "either as VALUE or with --value" in both.output, both.output
    assert [m.value for m in records(app_module, f"{app_module}-{app_module}.tally")] == [b"7"]


def test_value_type_is_a_model_of_the_app_as_faust_finds_it(app_module):
    ok = send(app_module, f"{app_module}-raw", "-V", "Order", '{"account": "a3", "amount": 4}')
    assert ok.exit_code == 0, ok.output
    [message] = records(app_module, f"{app_module}-raw")
    assert orjson.loads(message.value)["account"] == "a3"
    unknown = send(app_module, f"{app_module}-raw", "-V", "Ordr", "{}")
    assert unknown.exit_code == 2 and "Ordr" in unknown.output, unknown.output


def test_serializer_overrides_are_refused_with_the_way(app_module):
    result = send(app_module, "@tally", "1", "--value-serializer", "raw")
    assert result.exit_code == 2 and "value_serializer=" in result.output, result.output


def test_records_from_a_file_through_one_producer(app_module, tmp_path, monkeypatch):
    made = []
    producer = MemoryDriver.producer
    monkeypatch.setattr(MemoryDriver, "producer", lambda self, **kw: made.append(1) or producer(self, **kw))
    lines = [{"key": f"k{i}", "value": {"account": f"k{i}", "amount": i}, "timestamp": 1700000000 + i,
              "headers": {"n": str(i)}} for i in range(5)]
    path = tmp_path / "orders.jsonl"
    path.write_text("\n".join(orjson.dumps(line).decode() for line in lines) + "\n\n")
    result = send(app_module, "@order", "--file", str(path))
    assert result.exit_code == 0, result.output
    sent = records(app_module, f"{app_module}-orders")
    assert [(m.key, orjson.loads(m.value)["amount"], m.timestamp_ms, m.headers) for m in sent] == [
        (f"k{i}".encode(), i, (1700000000 + i) * 1000, [("n", str(i).encode())]) for i in range(5)]
    assert len(made) == 1  # one producer for every record
    assert "sent 5 records to" in result.output


def test_records_from_stdin_and_a_bad_line_sends_nothing(app_module):
    ok = send(app_module, "@tally", "--file", "-", input='{"value": 1}\n{"value": 2, "partition": 3}\n')
    assert ok.exit_code == 0, ok.output
    assert [(m.value, m.partition) for m in records(app_module, f"{app_module}-{app_module}.tally")][1] == (b"2", 3)
    bad = send(app_module, "@tally", "--file", "-", input='{"value": 3}\n{"valeu": 4}\n')
    assert bad.exit_code == 2 and "line 2" in bad.output and "valeu" in bad.output, bad.output
    assert len(records(app_module, f"{app_module}-{app_module}.tally")) == 2  # the good line 1 was not sent
    clash = send(app_module, "@tally", "5", "--file", "-", input='{"value": 3}\n')
    assert clash.exit_code == 2 and "--file" in clash.output, clash.output
