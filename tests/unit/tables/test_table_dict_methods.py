"""A table is a dict to a Faust user: ``pop`` and ``update`` work as they do on Faust's tables
(and on a dict), written through ``del table[k]`` and ``table[k] = v``, so their effects reach
the changelog as those do."""
import uuid

import pytest

import streamkit as sk
from streamkit.testing import wait_for


def make_app(tmp_path):
    name = f"dict-{uuid.uuid4().hex[:6]}"
    return sk.App(name, broker=f"memory://{name}", driver="memory", commit_interval=0.05, data_dir=str(tmp_path),
                  web_enabled=False)


async def test_pop_and_update_in_an_agent(tmp_path):
    app = make_app(tmp_path)
    src = app.topic("profiles", key_type=str, value_type=str, partitions=1)
    tiers = app.Table("tiers", key_type=str, value_type=str)
    popped = []

    @app.agent(src)
    async def profile(stream):
        async for key, tier in stream.items():
            if tier == "gone":
                popped.append((tiers.pop(key, None), tiers.pop(key, "absent")))
            else:
                tiers.update({key: tier}, **{f"{key}-shadow": tier.upper()})

    async with app.running():
        for key, tier in [("c0", "t0"), ("c1", "t1"), ("c0", "gone"), ("c9", "gone")]:
            await src.send(key=key, value=tier)
        await wait_for(lambda: len(popped) == 2, 10, message="both deletions processed")
        assert popped == [("t0", "absent"), (None, "absent")]
        assert dict(tiers.items()) == {"c0-shadow": "T0", "c1": "t1", "c1-shadow": "T1"}
        with pytest.raises(KeyError):
            tiers.pop("c0")


def test_a_table_table_join_refuses_pop_and_update_naming_its_sides(tmp_path):
    app = make_app(tmp_path)
    left, right = app.Table("left"), app.Table("right")
    joined = left.join(right)
    for call in (lambda: joined.pop("k"), lambda: joined.update({"k": 1})):
        with pytest.raises(TypeError, match="written by its sides"):
            call()
