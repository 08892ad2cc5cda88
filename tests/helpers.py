"""For tests that drive worker processes: wait on a condition, read a group's committed offsets."""
import time

from confluent_kafka import Consumer, TopicPartition


def wait_until(condition, timeout, what, interval=0.2):
    """Poll ``condition`` until it returns something truthy (returned); TimeoutError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting until {what}")
        time.sleep(interval)


def committed_total(broker, group, topic, partitions):
    """The sum of ``group``'s committed offsets on ``topic``: how many records it has checkpointed."""
    consumer = Consumer({"bootstrap.servers": broker, "group.id": group, "enable.auto.commit": False})
    try:
        tps = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
    finally:
        consumer.close()
    return sum(tp.offset for tp in tps if tp.offset >= 0)


def restored_state(broker, changelog, group, source, partitions):
    """What a worker restoring ``changelog`` now holds (latest value per key, decoded as ints):
    each checkpoint block applied only if ``group``'s committed offsets on ``source`` reached its
    mark, as tables/marks.py restores it."""
    from streamkit.tables.marks import MarkedBlocks, committed_covers
    from streamkit.testing import read_topic
    from streamkit.transport.base import Message

    consumer = Consumer({"bootstrap.servers": broker, "group.id": group, "enable.auto.commit": False})
    try:
        committed = {tp.partition: tp.offset for tp in consumer.committed(
            [TopicPartition(source, p) for p in range(partitions)], timeout=10)}
    finally:
        consumer.close()
    state: dict[bytes, bytes | None] = {}
    blocks = {p: MarkedBlocks(committed_covers({source: committed[p] if committed[p] >= 0 else None}), marked=False)
              for p in range(partitions)}
    for m in read_topic(broker, changelog, timeout=60, to_end=True):
        blocks[m.partition()].feed(Message(m.topic(), m.partition(), m.offset(), m.key(), m.value(),
                                           list(m.headers() or []), None), state)
    return {k.decode(): int(v) for k, v in state.items() if v is not None}


def word_counter(app, topic="words", *, partitions=None, value_type=str):
    """The guide's counting app declared on ``app`` as users write it (no partitions= on the
    table): records keyed by the word, ``counts[word] += 1``. Returns (topic, table, keys seen)."""
    words = app.topic(topic, key_type=str, value_type=value_type, partitions=partitions)
    counts = app.Table("counts", default=int)
    seen: list[str] = []

    @app.agent(words)
    async def count(stream):
        async for event in stream.events():
            counts[event.key] += 1
            seen.append(event.key)

    return words, counts, seen


def collected(app, topic):
    """An agent on ``app`` that notes every ``(key, value)`` read from ``topic``; returns the list."""
    seen: list = []

    @app.agent(topic)
    async def collect(stream):
        async for event in stream.events():
            seen.append((event.key, event.value))

    return seen


def memory_word_counters(name, tmp_path, tags="ab", *, partitions, **settings):
    """One counting app per tag, as workers of one app on one in-memory broker, each with its own
    data dir (``tmp_path / tag``)."""
    import streamkit as sk

    apps = []
    for tag in tags:
        app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False,
                     data_dir=str(tmp_path / tag), **settings)
        word_counter(app, partitions=partitions)
        apps.append(app)
    return apps


def memory_number_taker(prefix, tmp_path):
    """A memory-broker app of two partitions whose one agent appends each int it takes to
    ``seen``: (app, its topic ``numbers``, seen)."""
    import uuid

    import streamkit as sk

    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False, store="memory://",
                 data_dir=str(tmp_path), topic_partitions=2)
    numbers = app.topic("numbers", key_type=str, value_type=int, partitions=2)
    seen: list[int] = []

    @app.agent(numbers)
    async def take(stream):
        async for value in stream:
            seen.append(value)

    return app, numbers, seen
