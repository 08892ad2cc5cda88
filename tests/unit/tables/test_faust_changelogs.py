"""A streamkit app given a Faust app's id restores the changelogs Faust wrote. Where Faust's
records mean something else to streamkit (a windowed table's ``[key, [start, end]]`` keys, a
SetTable's ``[operation, key]`` operations) the restore is refused, naming the table, the topic,
the key and what to do; a table whose records read the same (raw keys, JSON values) restores.

The records below are Faust's bytes, as faust-streaming 0.15.3 writes them: its json codec on
``(key, (start, end))`` for a windowed table, on ``(operation, key)`` and the element for a
SetTable (faust/tables/base.py ``_set_windowed``, faust/tables/objects.py
``send_changelog_event``); ``tests/faust_apps/test_faust_changelog_bytes.py`` checks them
against faust-streaming itself.
"""
from __future__ import annotations

import uuid

import pytest

import streamkit as sk
from streamkit.testing import wait_for
from streamkit.transport.memory import MemoryBroker

# Faust's windowed table ``counts`` (tumbling 10 s), key "counter": 3 in the window at 1600000000
FAUST_WINDOWED = [(b'["counter",[1600000000.0,1600000009.9]]', b"3")]
# Faust's SetTable ``people``: oslo.add("bob"), rome.update({"carol"}), oslo.discard("bob")
FAUST_SET = [(b'[1,"oslo"]', b'"bob"'), (b'[15,"rome"]', b'[["carol"],[]]'), (b'[2,"oslo"]', b'"bob"')]


def faust_app(prefix: str, tmp_path) -> tuple[sk.App, MemoryBroker]:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, store="memory://",
                 data_dir=str(tmp_path))
    return app, MemoryBroker.named(name)


def faust_wrote(broker: MemoryBroker, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    """The changelog as the Faust app left it: one partition, as its one-partition source."""
    broker.create_topic(topic, 1)
    for key, value in records:
        broker.append(topic, key, value, 0, None, None)


async def refused(app: sk.App, seen: list, input_topic: sk.Topic) -> tuple[BaseException, dict]:
    """Start the worker on a record waiting in its input; the restore must halt it before the record
    is processed. Returns the error it halted with and the error policy's counts."""
    await input_topic.send(key="oslo", value="x")  # waiting for the agent once its table is restored
    async with app.running():
        runtime = app.runtime
        await wait_for(lambda: runtime.failed.is_set(), 10, message="the worker halting at the restore")
        fatal, errors = runtime.fatal, dict(runtime.errors.counts)
    assert seen == []  # halted: the waiting record was never processed with a misread table
    assert fatal is not None
    return fatal, errors


async def test_a_faust_windowed_changelog_is_refused_at_recovery(tmp_path):
    app, broker = faust_app("faustwin", tmp_path)
    clicks = app.topic("clicks", key_type=str, value_type=str, partitions=1)
    counts = app.Table("counts", default=int).tumbling(10)
    seen: list = []

    @app.agent(clicks)
    async def count(stream):
        async for key, _value in stream.items():
            counts[key] += 1
            seen.append(key)

    changelog = f"{app.id}-counts-changelog"  # Faust's name, and streamkit's
    faust_wrote(broker, changelog, FAUST_WINDOWED)
    fatal, _errors = await refused(app, seen, clicks)
    message = str(fatal)
    assert isinstance(fatal, sk.ForeignChangelog), repr(fatal)
    assert "'counts'" in message and changelog in message, message
    assert '["counter",[1600000000.0,1600000009.9]]' in message and "offset 0" in message, message
    assert "Faust" in message and "docs/migrating-from-faust.md" in message, message


@pytest.mark.parametrize(("kind", "value_type"), [("SetTable", str), ("SetTable", None), ("SetGlobalTable", str)],
                         ids=["elements-str", "untyped", "global"])
async def test_a_faust_set_table_changelog_is_refused_at_recovery(tmp_path, kind, value_type):
    app, broker = faust_app("faustset", tmp_path)
    joining = app.topic("joining", key_type=str, value_type=str, partitions=1)
    one_partition = {"partitions": 1} if kind == "SetGlobalTable" else {}  # as the changelog Faust left
    people = getattr(app, kind)("people", value_type=value_type, **one_partition)
    seen: list = []

    @app.agent(joining)
    async def join(stream):
        async for location, name in stream.items():
            people[location].add(name)
            seen.append(location)

    changelog = f"{app.id}-people-changelog"
    faust_wrote(broker, changelog, FAUST_SET)
    fatal, errors = await refused(app, seen, joining)
    message = str(fatal)
    assert isinstance(fatal, sk.ForeignChangelog), repr(fatal)
    assert "'people'" in message and changelog in message, message
    assert '[1,"oslo"]' in message and "SetTable" in message, message
    assert errors == {"dlq": 0, "skip": 0}  # refused, not dead-lettered record by record


async def test_a_faust_table_with_raw_keys_and_json_values_still_restores(tmp_path):
    """Faust's ``app.Table(name, key_type=bytes)``: raw keys, JSON values, read the same here."""
    app, broker = faust_app("faustraw", tmp_path)
    words = app.topic("words", key_type=bytes, value_type=str, partitions=1)
    counts = app.Table("counts", default=int, key_type=bytes)
    seen: list = []

    @app.agent(words)
    async def count(stream):
        async for key, _value in stream.items():
            counts[key] += 1
            seen.append(counts[key])

    faust_wrote(broker, f"{app.id}-counts-changelog", [(b"word", b"3"), (b"other", b"7")])
    async with app.running():
        await words.send(key=b"word", value="x")
        await wait_for(lambda: seen, 10, message="the record processed after the restore")
        assert seen == [4] and counts[b"other"] == 7
        assert app.runtime.fatal is None


async def test_faust_json_string_keys_restore_with_their_quotes_and_a_warning(tmp_path, caplog):
    """Faust's ``app.Table(name)`` writes a str key through its json codec: ``"word"``, quotes
    included. streamkit reads keys as UTF-8 text, so the entry is the key '"word"': not refused
    (a streamkit app may have such keys), but warned of once, naming the table, topic and key."""
    app, broker = faust_app("faustkeys", tmp_path)
    words = app.topic("words", key_type=str, value_type=str, partitions=1)
    counts = app.Table("counts", default=int)
    seen: list = []

    @app.agent(words)
    async def count(stream):
        async for key, _value in stream.items():
            counts[key] += 1
            seen.append(counts[key])

    changelog = f"{app.id}-counts-changelog"
    faust_wrote(broker, changelog, [(b'"word"', b"3"), (b'"other"', b"7")])
    async with app.running():
        await words.send(key="word", value="x")
        await wait_for(lambda: seen, 10, message="the record processed after the restore")
        assert seen == [1] and counts['"word"'] == 3  # Faust's count is under the quoted key
        assert app.runtime.fatal is None
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "JSON string" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert "'counts'" in warnings[0] and changelog in warnings[0] and "b'\"word\"'" in warnings[0], warnings[0]
    assert "docs/migrating-from-faust.md" in warnings[0], warnings[0]
