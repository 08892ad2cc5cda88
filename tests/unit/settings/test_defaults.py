"""An app with the settings left alone, as most users leave them: the default data_dir (under
the current directory), the default commit interval and store, a table without partitions=.

Every other test sets one of these (a temp data_dir, a short commit_interval): this one is what
a user's first app does. ``web_enabled=False`` only because the default port is shared on a
test machine; the memory driver stands in for the broker.
"""
from __future__ import annotations

import uuid

import streamkit as sk
from streamkit.settings import Settings
from streamkit.testing import wait_for
from streamkit.transport.memory import MemoryBroker
from tests.helpers import word_counter

WORDS = ["apple", "pear", "fig", "plum", "kiwi"]


def build(name: str):
    app = sk.App(name, broker=f"memory://{name}", driver="memory", web_enabled=False)
    words, counts, seen = word_counter(app)
    return app, words, counts, seen


def committed_total(app, topic: str = "words") -> int:
    """Records of ``topic`` the app's group has committed on the broker."""
    group = MemoryBroker.named(app.id).committed.get(app.id, {})
    return sum(offset for tp, offset in group.items() if tp.topic == topic)


async def test_a_table_app_with_every_default_checkpoints_and_keeps_its_counts_in_the_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert Settings().commit_interval > 0 and Settings().data_dir == "streamkit-data"
    name = f"defaults-{uuid.uuid4().hex[:6]}"
    app, words, counts, seen = build(name)
    async with app.running():
        for i in range(50):
            await words.send(key=WORDS[i % 5], value="x")
        await wait_for(lambda: len(seen) == 50, 10, message="50 words counted")
        # No checkpoint.commit() here: the periodic checkpoint, at the default interval, commits.
        await wait_for(lambda: committed_total(app) == 50, 3 * app.conf.commit_interval + 10,
                       message="the periodic checkpoint committed every record")
        partitions = counts.partitions
    assert partitions == len(MemoryBroker.named(name).logs["words"])  # the table took its source topic's count
    stores = tmp_path / "streamkit-data" / name
    assert stores.is_dir() and any(stores.rglob("*")), f"no store under the default data_dir in {tmp_path}"

    again, words2, counts2, seen2 = build(name)  # a restart in the same directory
    async with again.running():
        await wait_for(lambda: again.runtime.tables is not None and again.runtime.tables.ready
                       and len(counts2.local) == partitions, 10, message="every table partition restored")
        assert dict(counts2.items()) == {w: 10 for w in WORDS}
        # The local stores were current: nothing of the 50 counts was replayed from the changelog.
        assert again.runtime.tables.replayed_total == 0, again.runtime.tables.replayed_total
        await words2.send(key="fig", value="x")
        await wait_for(lambda: seen2 == ["fig"], 10, message="one more word counted")
        assert counts2["fig"] == 11
        await wait_for(lambda: committed_total(again) == 51, 3 * again.conf.commit_interval + 10,
                       message="the periodic checkpoint after the restart")
