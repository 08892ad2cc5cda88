"""What the Spark differential tests read back from the broker: a group's committed offsets,
a changelog's latest values, a topic's records as a multiset."""
from collections import Counter

from streamkit.tables.marks import MARK_KEY
from streamkit.testing.helpers import read_topic


def group_committed(app, wanted):
    """The app's group's committed offsets summed over every partition of the topics ``wanted``
    picks (from the broker: one run commits only the partitions it got records of)."""
    from confluent_kafka import Consumer, TopicPartition

    from streamkit.testing import confluent_conf

    consumer = Consumer(confluent_conf(app.conf, **{"group.id": app.id}))
    try:
        meta = consumer.list_topics(timeout=10).topics
        parts = [TopicPartition(t, p) for t in meta if wanted(t) for p in meta[t].partitions]
        return sum(max(tp.offset, 0) for tp in consumer.committed(parts, timeout=10))
    finally:
        consumer.close()


def latest(address, topic, isolation):
    """The changelog's latest value per key (marks and deleted keys left out)."""
    values = {}
    for m in sorted(read_topic(address, topic, to_end=True, isolation=isolation), key=lambda m: m.offset()):
        if m.key() != MARK_KEY:
            values[(m.partition(), m.key())] = m.value()
    return {k: v for k, v in values.items() if v is not None}


def finals(address, topic, isolation):
    return Counter((m.partition(), m.key(), m.value())
                   for m in read_topic(address, topic, to_end=True, isolation=isolation))
