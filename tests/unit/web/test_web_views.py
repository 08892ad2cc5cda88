"""Web views inside a worker (memory driver): status codes, readiness, metrics, auth."""
import asyncio
import time
import uuid

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

import streamkit as sk
import streamkit.tables.manager as manager_module
from streamkit.devbroker import free_port
from streamkit.tables.marks import MARK_KEY
from streamkit.testing import wait_for
from streamkit.transport.memory import MemoryBroker


def build(tmp_path, name=None, **settings):
    name = name or f"web-{uuid.uuid4().hex[:6]}"
    port = settings.pop("web_port", None) or free_port()
    app = sk.App(name, broker=f"memory://{name}", driver="memory", store="memory://", data_dir=str(tmp_path),
                 commit_interval=0.05, web_port=port, **settings)
    src = app.topic("scores", key_type=int, value_type=int, partitions=2)
    scores = app.Table("scores", key_type=int, default=int)

    @app.agent(src)
    async def keep(stream):
        async for event in stream.events():
            scores[event.key] = event.value

    @app.page("/boom")
    async def boom(web, request):
        raise RuntimeError("view failure")

    return app, src, f"http://127.0.0.1:{port}"


async def get(session, url, **kwargs):
    async with session.get(url, **kwargs) as resp:
        is_json = resp.content_type == "application/json"
        return resp.status, await resp.json(content_type=None) if is_json else await resp.text()


async def test_status_codes_metrics_and_failing_views(tmp_path):
    app, src, base = build(tmp_path)
    async with app.running(), aiohttp.ClientSession() as session:
        await wait_for(lambda: app.runtime.tables.ready and app.runtime.rebalances, 10)
        for key in range(10):
            await src.send(key=key, value=key * 10)
        await wait_for(lambda: app.runtime.router.records_in == 10, 10)
        await wait_for(lambda: app.runtime.tables.tables[0].get(7) == 70, 10)
        assert await get(session, f"{base}/tables/scores/7") == (200, {"key": 7, "value": 70})
        status, body = await get(session, f"{base}/tables/scores/99")
        assert status == 404 and "not in table" in body["error"]
        status, body = await get(session, f"{base}/tables/nope/1")
        assert status == 404 and "no table" in body["error"]
        status, body = await get(session, f"{base}/tables/scores/not-an-int")
        assert status == 400 and "bad key" in body["error"]
        status, body = await get(session, f"{base}/tables")
        assert body["scores"]["local_partitions"] == [0, 1]
        assert (await get(session, f"{base}/health"))[0] == 200
        assert (await get(session, f"{base}/ready")) == (200, {"ready": True, "tasks": {"running": 2}})
        status, body = await get(session, f"{base}/boom")
        assert status == 500 and "view failure" in body["error"]
        assert (await get(session, f"{base}/no-such-page"))[0] == 404
        status, text = await get(session, f"{base}/metrics")
        families = {f.name: f for f in text_string_to_metric_families(text)}
        assert status == 200
        received = families["streamkit_records_received"].samples[0].value
        assert received == 10
        assert "streamkit_commit_seconds" in families and "streamkit_consumer_lag" in families
        await src.send(key=1, value=1)  # the worker still processes after a view failed
        await wait_for(lambda: app.runtime.router.records_in == 11, 10)


async def test_bearer_token_is_required_when_configured(tmp_path):
    app, _, base = build(tmp_path, web_auth_token="s3cret")
    async with app.running(), aiohttp.ClientSession() as session:
        status, body = await get(session, f"{base}/health")
        assert status == 401 and "token" in body["error"]
        assert (await get(session, f"{base}/health", headers={"Authorization": "Bearer wrong"}))[0] == 401
        assert (await get(session, f"{base}/health", headers={"Authorization": "Bearer s3cret"}))[0] == 200


async def test_ready_is_false_during_a_slow_recovery(tmp_path, monkeypatch):
    app, src, base = build(tmp_path)
    async with app.running():  # fill the changelog once
        await wait_for(lambda: app.runtime.rebalances, 10)
        for key in range(50):
            await src.send(key=key, value=key)
        await wait_for(lambda: app.runtime.router.records_in == 50, 10)
    original = manager_module.replay
    replaying, finish = asyncio.Event(), asyncio.Event()

    async def slow_replay(*args, **kwargs):  # recovery lasts until the test lets it finish
        replaying.set()
        await finish.wait()
        return await original(*args, **kwargs)

    monkeypatch.setattr(manager_module, "replay", slow_replay)
    again = sk.App(app.id, broker=app.conf.broker, driver="memory", store="memory://", data_dir=str(tmp_path),
                   web_port=app.conf.web_port, commit_interval=0.05)
    source = again.topic("scores", key_type=int, value_type=int, partitions=2)
    table = again.Table("scores", key_type=int, default=int)

    @again.agent(source)
    async def keep(stream):
        async for event in stream.events():
            table[event.key] = event.value
    async with again.running(), aiohttp.ClientSession() as session:
        await wait_for(replaying.is_set, 10, message="the recovery started")
        status, body = await get(session, f"{base}/ready")
        assert status == 503 and body["ready"] is False and "recovery" in body, (status, body)
        assert body["tasks"] == {"restoring": 2} and [t["task"] for t in body["restoring"]] == [0, 1], body
        finish.set()

        async def ready():
            return (await get(session, f"{base}/ready"))[0] == 200

        await wait_for(ready, 10, interval=0.1, message="ready after recovery")
        status, body = await get(session, f"{base}/tables/scores/49")
        assert (status, body) == (200, {"key": 49, "value": 49})
        assert table[49] == 49


async def test_a_stateless_worker_is_ready_once_it_has_its_assignment(tmp_path):
    """No tables: nothing to restore, so /ready turns 200 with the first assignment (it used to
    wait for a recovery that never comes) and reports the running tasks."""
    port = free_port()
    app = sk.App(f"stateless-{uuid.uuid4().hex[:6]}", broker="memory://stateless", driver="memory",
                 web_port=port, data_dir=str(tmp_path))
    src = app.topic("clicks", partitions=3)

    @app.agent(src)
    async def ignore(stream):
        async for _ in stream:
            pass

    async with app.running(), aiohttp.ClientSession() as session:
        async def ready():
            return (await get(session, f"http://127.0.0.1:{port}/ready"))[0] == 200

        await wait_for(ready, 10, interval=0.1, message="a stateless worker ready")
        assert app.runtime.tables is None
        status, body = await get(session, f"http://127.0.0.1:{port}/ready")
        assert body == {"ready": True, "tasks": {"running": 3}}


async def test_a_taken_web_port_is_a_clear_startup_error(tmp_path):
    app, _, _ = build(tmp_path)
    other, _, _ = build(tmp_path, web_port=app.conf.web_port)
    async with app.running():
        try:
            await other.start()
        except sk.ConfigurationError as exc:
            assert f"127.0.0.1:{app.conf.web_port}" in str(exc) and "--web-port" in str(exc)
        else:
            await other.stop()
            raise AssertionError("a second worker bound the same web port")
    assert other.runtime is None


async def test_a_taken_web_port_is_refused_before_joining_the_group(tmp_path):
    """The port is bound before the group is joined: the healthy worker sees no rebalance."""
    app, _, _ = build(tmp_path / "a")
    other, _, _ = build(tmp_path / "b", name=app.id, web_port=app.conf.web_port)
    broker = MemoryBroker.named(app.id)
    async with app.running():
        await wait_for(lambda: app.runtime.rebalances, 10)
        generation = broker.generations[app.id]
        try:
            await other.start()
        except sk.ConfigurationError as exc:
            assert str(app.conf.web_port) in str(exc)
        else:
            await other.stop()
            raise AssertionError("a second worker bound the same web port")
        assert broker.generations[app.id] == generation, "the refused worker joined the group"
        third, _, _ = build(tmp_path / "c", name=app.id)  # a joining worker does move the generation
        async with third.running():
            await wait_for(lambda: broker.generations[app.id] > generation, 10)


async def test_queries_are_forwarded_to_the_owners_advertised_url(tmp_path):
    """``web_advertised_url`` is what the other workers forward to (here ``localhost``, where the
    default would be ``http://127.0.0.1:<port>``); an advertised URL nobody answers is a 503
    naming it, never a hang."""
    a, src, base_a = build(tmp_path / "a")
    port_b = free_port()
    b, _, _ = build(tmp_path / "b", name=a.id, web_port=port_b, web_advertised_url=f"http://localhost:{port_b}")
    table_b = b.tables["scores"]

    async with a.running(), b.running(), aiohttp.ClientSession() as session:
        def scores_of(app):
            return [tp.partition for tp in app.runtime.assigned if tp.topic == "scores"]

        await wait_for(lambda: len(scores_of(a)) == 1 and len(scores_of(b)) == 1, 10, message="one partition each")
        for key in range(20):
            await src.send(key=key, value=key * 10)
        await wait_for(lambda: a.runtime.router.records_in + b.runtime.router.records_in == 20, 10)
        [owned_by_b] = scores_of(b)
        await wait_for(lambda: a.runtime.membership.owner("scores", owned_by_b) == f"http://localhost:{port_b}", 10,
                       message="b's claim, with its advertised URL, reached a")
        key = next(k for k in range(20) if table_b.partition_of(table_b.key_codec.encode(k)) == owned_by_b)
        status, body = await get(session, f"{base_a}/tables/scores/{key}")
        assert (status, body) == (200, {"key": key, "value": key * 10})
        dead = f"http://127.0.0.1:{free_port()}"
        a.runtime.membership.claims[("scores", owned_by_b)] = (time.time(), dead)  # as if b advertised a wrong URL
        status, body = await get(session, f"{base_a}/tables/scores/{key}")
        assert status == 503 and dead in body["error"], body


def build_topic_routed(tmp_path, name=None, **settings):
    """A stateless app, as Faust's topic_route example has it: the view runs where the key's
    partition of the topic is consumed."""
    name = name or f"troute-{uuid.uuid4().hex[:6]}"
    port = settings.pop("web_port", None) or free_port()
    app = sk.App(name, broker=f"memory://{name}", driver="memory", store="memory://", data_dir=str(tmp_path),
                 web_port=port, **settings)
    orders = app.topic("orders", key_type=str, value_type=int, partitions=2)
    latest: dict[str, int] = {}  # this worker's own memory: only right on the key's worker

    @app.agent(orders)
    async def remember(stream):
        async for event in stream.events():
            latest[event.key] = event.value

    @app.page("/latest/{user}")
    @app.topic_route(topic=orders, match_info="user")
    async def latest_of(web, request, user):
        return web.json({"user": user, "latest": latest.get(user), "port": port})

    @app.page("/whoami")
    @app.topic_route(orders, query_param="user")
    async def whoami(web, request):
        return web.json({"port": port})

    return app, orders, port


async def test_topic_route_answers_on_the_worker_assigned_the_keys_partition(tmp_path):
    from streamkit.transport.partitioner import partition_for_key

    a, orders, port_a = build_topic_routed(tmp_path / "a")
    b, _, port_b = build_topic_routed(tmp_path / "b", name=a.id)
    async with a.running(), b.running(), aiohttp.ClientSession() as session:
        def mine(app):
            return [tp.partition for tp in app.runtime.assigned if tp.topic == "orders"]

        await wait_for(lambda: len(mine(a)) == 1 and len(mine(b)) == 1, 10, message="one partition each")
        [of_b] = mine(b)
        await wait_for(lambda: a.runtime.membership.topic_owner("orders", of_b) == f"http://127.0.0.1:{port_b}", 10,
                       message="b's assignment claim reached a")
        user = next(u for u in (f"u{i}" for i in range(50)) if partition_for_key(u.encode(), 2) == of_b)
        await orders.send(key=user, value=42)
        await wait_for(lambda: b.runtime.router.records_in == 1, 10, message="b consumed the order")
        status, body = await get(session, f"http://127.0.0.1:{port_a}/latest/{user}")
        assert (status, body) == (200, {"user": user, "latest": 42, "port": port_b})  # answered by b, via a
        status, body = await get(session, f"http://127.0.0.1:{port_a}/whoami", params={"user": user})
        assert (status, body) == (200, {"port": port_b})
        status, body = await get(session, f"http://127.0.0.1:{port_a}/whoami")
        assert status == 400 and "'user'" in body["error"]


async def test_a_view_reading_a_missing_key_stores_nothing(tmp_path):
    """The guide's view (``counts[word]``, a table with default=int) answers the default for a
    word never counted, and stores nothing: the built-in endpoint still answers 404 for it, and
    no changelog record is made of it."""
    name = f"web-{uuid.uuid4().hex[:6]}"
    port = free_port()
    app = sk.App(name, broker=f"memory://{name}", driver="memory", store="memory://", data_dir=str(tmp_path),
                 commit_interval=0.05, web_port=port)
    words = app.topic("words", key_type=str, value_type=str, partitions=2)
    counts = app.Table("counts", default=int)

    @app.agent(words)
    async def count(stream):
        async for word in stream:
            counts[word] += 1

    @app.page("/count/{word}/")
    @app.table_route(table=counts, match_info="word")
    async def word_count(web, request, word):
        return web.json({"word": word, "count": counts[word]})

    base = f"http://127.0.0.1:{port}"
    async with app.running(), aiohttp.ClientSession() as session:
        await wait_for(lambda: app.runtime.tables.ready and app.runtime.rebalances, 10)
        await words.send(key="seen", value="seen")
        await wait_for(lambda: counts.get("seen") == 1, 10)
        assert await get(session, f"{base}/count/seen/") == (200, {"word": "seen", "count": 1})
        assert await get(session, f"{base}/count/never/") == (200, {"word": "never", "count": 0})
        status, body = await get(session, f"{base}/tables/counts/never")
        assert status == 404 and "not in table" in body["error"], body
        assert "never" not in counts
        await app.runtime.checkpoint.commit()
    broker = MemoryBroker.named(app.conf.bootstrap_servers)
    changelog = [m.key for part in broker.logs.get(counts.changelog.name, []) for m in part if m.key != MARK_KEY]
    assert changelog == [b"seen"]
