"""What the web layer protects (issue 20): request bodies are bounded, a forwarded query carries
the app's bearer token and goes only to a live member's web URL, never to an address a claim
names otherwise."""
from __future__ import annotations

import time

import aiohttp
from aiohttp import web

from streamkit.devbroker import free_port
from streamkit.testing import wait_for
from tests.unit.web.test_web_views import build, get


async def test_a_request_body_over_the_limit_answers_413(tmp_path):
    app, _, base = build(tmp_path, web_max_request_size=100)

    @app.page("/echo")
    async def echo(web_, request):
        return web_.json({"size": len(await request.read())})

    async with app.running(), aiohttp.ClientSession() as session:
        async with session.post(f"{base}/echo", data=b"x" * 100) as resp:
            assert resp.status == 200 and (await resp.json())["size"] == 100
        async with session.post(f"{base}/echo", data=b"x" * 101) as resp:
            assert resp.status == 413 and "error" in await resp.json()


def _scores_of(app):
    return [tp.partition for tp in app.runtime.assigned if tp.topic == "scores"]


async def _two_workers(tmp_path, **settings):
    a, src, base_a = build(tmp_path / "a", **settings)
    b, _, _ = build(tmp_path / "b", name=a.id, **settings)
    return a, b, src, base_a


async def test_a_forwarded_query_carries_the_token_to_the_owner(tmp_path):
    a, b, src, base_a = await _two_workers(tmp_path, web_auth_token="tok-41")
    table_b = b.tables["scores"]
    async with a.running(), b.running(), aiohttp.ClientSession() as session:
        await wait_for(lambda: len(_scores_of(a)) == 1 and len(_scores_of(b)) == 1, 10, message="one partition each")
        [owned_by_b] = _scores_of(b)
        await wait_for(lambda: a.runtime.membership.owner("scores", owned_by_b) is not None, 10, message="b's claim")
        key = next(k for k in range(20) if table_b.partition_of(table_b.key_codec.encode(k)) == owned_by_b)
        await src.send(key=key, value=7)
        await wait_for(lambda: table_b.get(key) == 7, 10, message="b stored the key")
        auth = {"Authorization": "Bearer tok-41"}
        assert await get(session, f"{base_a}/tables/scores/{key}", headers=auth) == (200, {"key": key, "value": 7})
        assert (await get(session, f"{base_a}/tables/scores/{key}"))[0] == 401


async def test_a_claim_naming_a_foreign_address_is_not_followed(tmp_path):
    """Anyone able to write the cluster topic could name any URL: the query is not sent there."""
    hits: list[str] = []

    async def record(request: web.Request) -> web.Response:
        hits.append(request.headers.get("Authorization", ""))
        return web.json_response({"value": "forged"})

    outsider = web.Application()
    outsider.router.add_get("/{tail:.*}", record)
    runner = web.AppRunner(outsider)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        a, b, src, base_a = await _two_workers(tmp_path, web_auth_token="tok-42")
        async with a.running(), b.running(), aiohttp.ClientSession() as session:
            await wait_for(lambda: len(_scores_of(a)) == 1 and len(_scores_of(b)) == 1, 10, message="one each")
            [owned_by_b] = _scores_of(b)
            table = b.tables["scores"]
            key = next(k for k in range(20) if table.partition_of(table.key_codec.encode(k)) == owned_by_b)
            foreign = f"http://127.0.0.1:{port}"
            a.runtime.membership.claims[("scores", owned_by_b)] = (time.time(), foreign)
            status, body = await get(
                session, f"{base_a}/tables/scores/{key}", headers={"Authorization": "Bearer tok-42"}
            )
            assert status == 503 and "not the web URL of a live member" in body["error"], body
    finally:
        await runner.cleanup()
    assert hits == []  # neither the query nor the token went there
