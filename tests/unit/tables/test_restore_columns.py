"""The restore applies fetched batches a run at a time (dict updates between marks); it must end
exactly where applying them record by record ends: same store, offset, mark, dropped keys."""
from __future__ import annotations

import asyncio

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkit.tables.marks import MARK_HEADERS, MARK_KEY, OPENING_MARK, MarkedBlocks
from streamkit.tables.recovery import _apply, _apply_one_by_one
from streamkit.tables.stores import MemoryStore
from streamkit.transport import TP
from streamkit.transport.base import Message
from streamkit.transport.columns import Columns

CHANGELOG = TP("app-counts-changelog", 0)

record = st.one_of(
    st.tuples(st.just("put"), st.sampled_from([b"a", b"b", b"c", b"", None]), st.sampled_from([b"1", b"2", None])),
    st.tuples(st.just("mark"), st.integers(0, 12), st.booleans()),  # (input offset, an opening mark)
    st.tuples(st.just("gap"), st.integers(1, 3), st.none()),  # records compaction removed
    st.tuples(st.just("impostor"), st.none(), st.none()),  # the mark key without the mark header
)


def messages_of(steps: list) -> list[Message]:
    out, offset = [], 0
    for kind, a, b in steps:
        if kind == "gap":
            offset += a
            continue
        if kind == "put":
            out.append(Message(CHANGELOG.topic, 0, offset, a, b, None, None))
        elif kind == "mark":
            value = OPENING_MARK if b else orjson.dumps({"in": a})
            out.append(Message(CHANGELOG.topic, 0, offset, MARK_KEY, value, MARK_HEADERS, None))
        else:
            out.append(Message(CHANGELOG.topic, 0, offset, MARK_KEY, b"9", None, None))
        offset += 1
    return out


def state_of(store: MemoryStore, blocks: MarkedBlocks | None) -> tuple:
    held = None if blocks is None else (dict(blocks.pending), set(blocks.dropped), blocks.marked, blocks.last)
    return dict(store.data), store.offset, store.sources, held


def restore(messages: list[Message], cuts: list[int], use_blocks: bool, marked: bool, bulk: bool) -> tuple:
    store = MemoryStore()
    blocks = MarkedBlocks(lambda offsets: offsets.get("in", 0) <= 6, marked=marked) if use_blocks else None
    bounds = sorted({0, len(messages), *(c % (len(messages) + 1) for c in cuts)})

    async def run() -> None:
        for start, end in zip(bounds, bounds[1:], strict=False):
            columns = Columns.of(messages[start:end])
            if bulk:
                await _apply(store, CHANGELOG, columns, None, None, blocks)
            else:
                marks = [i for i, m in enumerate(messages[start:end])
                         if m.key == MARK_KEY and any(name == "streamkit-mark" for name, _ in m.headers)]
                await _apply_one_by_one(store, CHANGELOG, columns, {}, marks, None, blocks)

    asyncio.run(run())
    return state_of(store, blocks)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(record, max_size=40), st.lists(st.integers(0, 40), max_size=4), st.booleans(), st.booleans())
def test_runs_applied_in_bulk_end_where_records_applied_one_by_one_end(steps, cuts, use_blocks, marked):
    messages = messages_of(steps)
    assert restore(messages, cuts, use_blocks, marked, bulk=True) == \
        restore(messages, cuts, use_blocks, marked, bulk=False)


def test_a_bad_value_goes_to_the_error_policy_and_the_rest_of_its_batch_applies():
    messages = messages_of([("put", b"a", b"1"), ("put", b"b", b"x"), ("put", b"c", b"3")])
    store, handed = MemoryStore(), []

    def bad_values(tp, values):
        return [(i, ValueError(v)) for i, v in enumerate(values) if v == b"x"]

    async def on_bad(tp, message, problem):
        handed.append((tp, message.offset, message.key, str(problem)))

    asyncio.run(_apply(store, CHANGELOG, Columns.of(messages), bad_values, on_bad, None))
    assert store.data == {b"a": b"1", b"c": b"3"} and store.offset == 2
    assert handed == [(CHANGELOG, 1, b"b", "b'x'")]


def test_a_mark_value_is_never_checked_as_a_table_value():
    messages = messages_of([("put", b"a", b"1"), ("mark", 0, True), ("put", b"b", b"2")])
    seen = []

    def bad_values(tp, values):
        seen.append(list(values))
        return []

    store = MemoryStore()
    asyncio.run(_apply(store, CHANGELOG, Columns.of(messages), bad_values, None,
                       MarkedBlocks(lambda offsets: True, marked=False)))
    assert seen == [[b"1", None, b"2"]]
    assert store.data == {b"a": b"1"}  # b waits for the next mark: the opening mark began a block


def test_a_table_names_each_value_it_cannot_read_and_only_those():
    import streamkit as sk

    app = sk.App("bad-values")
    plain = app.Table("plain", default=int).entries
    values = [b'{"n": 1}', None, b"2", b"not json", b'{"__sk__":"set","v":[1]}', b'{"__sk__":"nope"}', b""]
    assert [i for i, _ in plain.bad_values(values)] == [3, 5, 6]
    assert plain.bad_values([b"1", None, b'"x"']) == []
    assert [i for i, _ in plain.bad_values([b"1", b'{"__sk__":"nope"}'])] == [1]  # parses, cannot be rebuilt
    # the all-plain check alone (no tag anywhere): each of these decides a batch by itself
    assert [i for i, _ in plain.bad_values([b"1", b""])] == [1]
    assert [i for i, _ in plain.bad_values([b"1", None, b"oops"])] == [2]
    assert [i for i, _ in plain.bad_values([b"[1", b"2]"])] == [0, 1]  # each value parsed alone
    assert plain.bad_values([None, None]) == [] and plain.bad_values([]) == []

    class Strict(sk.Record):
        n: int

    typed = app.Table("typed", value_type=Strict).entries
    assert [i for i, _ in typed.bad_values([b'{"n": 1}', b'{"n": "x"}', b"[]"])] == [1, 2]
    raw = app.Table("raw", value_type=bytes).entries
    assert raw.bad_values([b"\xff", b""]) == []
