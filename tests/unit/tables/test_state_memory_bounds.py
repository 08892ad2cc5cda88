"""What bounds a worker's memory as state grows: the write caches (an early checkpoint once
they hold ``table_cache_max_keys`` keys) and RocksDB (one block cache for all stores, memtables
charged to it; Faust's ``rocksdb_options`` names)."""
import pytest

import streamkit as sk
from streamkit.errors import ConfigurationError
from streamkit.testing import wait_for
from tests.unit.tables.test_tables_memory import build, changelog, new_name


async def send_distinct(topic, n):
    for i in range(n):
        await topic.send(key=f"k{i}", value="x")


async def test_many_distinct_keys_checkpoint_before_the_interval(tmp_path):
    app, words, counts, seen = build(new_name(), tmp_path, commit_interval=60.0, table_cache_max_keys=100)
    async with app.running():
        await send_distinct(words, 1000)
        await wait_for(lambda: len(seen) == 1000, 10)
        # commit_interval is a minute: only the key ceiling can have written the changelog by now
        await wait_for(lambda: len(changelog(app, counts)) >= 900, 10)
        assert app.runtime.early_checkpoints >= 1
        cached = app.runtime.tables.cached_keys()
        assert cached < 1000, cached


async def test_rocksdb_stores_share_one_bounded_cache(tmp_path):
    app, words, counts, seen = build(new_name(), tmp_path, store="rocksdb://",
                                     rocksdb_options={"block_cache_size": 16 << 20, "write_buffer_size": 1 << 20})
    async with app.running():
        await send_distinct(words, 2000)
        await wait_for(lambda: len(seen) == 2000, 10)
        memory = app.runtime.tables.rocks_memory
        # the checkpoint applied the writes to the stores: their memtables are charged to the cache
        await wait_for(lambda: memory.usage() > 0, 10)
        assert memory.tuning.block_cache_size == 16 << 20 and memory.usage() <= 16 << 20
        assert counts["k1999"] == 1


@pytest.mark.parametrize("options, message", [
    ({"block_cache_compressed_size": 1 << 20}, "RocksDB 8 removed the compressed block cache"),
    ({"max_bytes_for_level_base": 1}, "not a known option: use block_cache_size"),
    ({"block_cache_size": "64MB"}, "expected an integer"),
    ({"block_cache_size": 1 << 20}, "at least 8388608 bytes"),
])
def test_rocksdb_options_refused_at_app_creation(options, message):
    with pytest.raises(ConfigurationError, match=message):
        sk.App(new_name(), broker="memory://x", driver="memory", rocksdb_options=options)


def test_a_write_cache_ceiling_below_one_key_is_refused():
    with pytest.raises(ConfigurationError, match="table_cache_max_keys=0: must be at least 1"):
        sk.App(new_name(), broker="memory://x", driver="memory", table_cache_max_keys=0)


def test_rocksdb_stores_filter_absent_keys_in_memtables_and_level_0(tmp_path):
    """A table of distinct keys reads every key once and finds nothing: each store is opened
    with a whole-key memtable bloom filter and level-0 filters pinned (RocksDB's own OPTIONS
    file says what it runs with)."""
    from streamkit.tables.rocks_options import RocksTuning
    from streamkit.tables.stores import RocksStore

    store = RocksStore(str(tmp_path / "store"), RocksTuning.from_settings({}).shared())
    store.apply({b"present": b"1"}, 0)
    assert store.get(b"absent") is None and store.get(b"present") == b"1"
    written = "".join(p.read_text() for p in (tmp_path / "store").glob("OPTIONS-*"))
    assert "memtable_whole_key_filtering=true" in written
    assert "memtable_prefix_bloom_size_ratio=0.1" in written  # RocksDB's name for the ratio
    assert "pin_l0_filter_and_index_blocks_in_cache=true" in written
