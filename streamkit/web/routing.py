"""Send a table query to the worker that owns the key's partition.

A view decorated with ``@app.table_route`` runs where the key lives: locally when this worker
serves that partition, else the request is forwarded (once) to the owner's URL from the cluster
claims. A partition being recovered or moved answers 503 with a JSON reason, never a traceback.
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web

from ..codecs import JsonCodec
from ..errors import DecodeError
from ..models.record import dumps
from ..settings import Secret
from ..transport.base import TP
from ..transport.partitioner import partition_for_key
from .tls import client_context

if TYPE_CHECKING:
    from ..types.app import AppProtocol

FORWARDED = "X-Streamkit-Forwarded"


def decode_url_key(table: Any, raw: str) -> Any:
    """A key from a URL: text for str/untyped keys, JSON for anything typed (400 on failure);
    ``table`` is anything with a ``key_type`` (a table or a topic)."""
    if table.key_type in (None, str):
        return raw
    if table.key_type is bytes:
        return raw.encode()
    try:
        return JsonCodec(table.key_type).decode(raw.encode())
    except DecodeError as exc:
        raise web.HTTPBadRequest(text=_json({"error": f"bad key {raw!r}: {exc}"}), content_type="application/json") from exc


def _json(obj: Any) -> str:
    return dumps(obj).decode()


def error(status: int, message: str, **extra: Any) -> web.Response:
    return web.json_response({"error": message, **extra}, status=status, dumps=_json)


def member_urls(app: "AppProtocol") -> set[str]:
    """The web URLs of the app's live members: the only places a query is forwarded to (a claim
    naming any other address is not followed)."""
    membership = app.processing.membership
    if membership is None:
        return set()
    return {m.url for m in membership.live() if m.url and urlsplit(m.url).scheme in ("http", "https")}


async def forward(app: "AppProtocol", request: web.Request, url: str) -> web.Response:
    """Proxy ``request`` to ``url`` (same path and query), a live member's, with the app's bearer
    token; relay the answer."""
    if url not in member_urls(app):
        return error(503, f"not forwarding to {url}: not the web URL of a live member of {app.id!r}")
    headers = {FORWARDED: "1"}
    token = app.conf.web_auth_token
    if token:
        headers["Authorization"] = f"Bearer {token.reveal() if isinstance(token, Secret) else token}"
    elif "Authorization" in request.headers:  # a page's own scheme: passed on as it came
        headers["Authorization"] = request.headers["Authorization"]
    target = url.rstrip("/") + request.rel_url.path_qs
    try:
        connector = aiohttp.TCPConnector(ssl=client_context(app.conf))
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10), connector=connector) as session:
            async with session.request(request.method, target, headers=headers, data=await request.read()) as resp:
                body = await resp.read()
                return web.Response(body=body, status=resp.status, content_type=resp.content_type)
    except aiohttp.ClientError as exc:
        return error(503, f"owner {url} unreachable: {exc}")


async def route_key(app: "AppProtocol", table: Any, key: Any, request: web.Request) -> web.Response | None:
    """None when this worker should answer; otherwise the forwarded (or 503) response."""
    table = getattr(table, "table", table)  # a windowed table's wrapper routes by its table
    number = table.key_partition(key)
    part = table.local.get(number)
    if part is not None:
        return None if part.ready else error(503, f"partition {number} of {table.name!r} is recovering",
                                             partition=number)
    if request.headers.get(FORWARDED):
        return error(503, f"partition {number} of {table.name!r} is moving between workers", partition=number)
    membership = app.processing.membership
    owner = membership.owner(table.name, number) if membership is not None else None
    if owner is None or owner == (membership.url if membership else None):
        return error(503, f"no worker serves partition {number} of {table.name!r} yet", partition=number)
    return await forward(app, request, owner)


def table_route(app: "AppProtocol", table: Any, *, match_info: str | None = None, query_param: str | None = None) -> Any:
    if (match_info is None) == (query_param is None):
        raise ValueError("table_route needs exactly one of match_info or query_param")

    def decorate(view: Any) -> Any:
        @functools.wraps(view)
        async def routed(web_: Any, request: web.Request, **kwargs: Any) -> web.StreamResponse:
            raw = request.match_info.get(match_info) if match_info else request.query.get(query_param or "")
            if raw is None:
                return error(400, f"missing key parameter {match_info or query_param!r}")
            key = decode_url_key(table, raw)
            forwarded = await route_key(app, table, key, request)
            if forwarded is not None:
                return forwarded
            return await view(web_, request, **kwargs)

        return routed

    return decorate


async def route_topic_key(app: "AppProtocol", topic: Any, key: Any, request: web.Request) -> web.Response | None:
    """None when this worker is assigned the key's partition of ``topic``; otherwise the
    forwarded (or 503) response."""
    context = app.processing
    if not context.running:
        return error(503, "the worker is not running")
    count = context.known_partition_count(topic.name) or topic.partitions or app.conf.topic_partitions
    number = partition_for_key(topic.key_codec.encode(key) or b"", count)
    if TP(topic.name, number) in context.assigned:
        return None
    if request.headers.get(FORWARDED):
        return error(503, f"partition {number} of topic {topic.name!r} is moving between workers", partition=number)
    membership = context.membership
    owner = membership.topic_owner(topic.name, number) if membership is not None else None
    if owner is None or owner == (membership.url if membership else None):
        return error(503, f"no worker is assigned partition {number} of topic {topic.name!r} yet", partition=number)
    return await forward(app, request, owner)


def topic_route(app: "AppProtocol", topic: Any, *, match_info: str | None = None, query_param: str | None = None,
                exact_key: str | None = None) -> Any:
    """Faust's ``@app.topic_route``: answer on the worker assigned the key's partition of ``topic``."""
    if sum(x is not None for x in (match_info, query_param, exact_key)) != 1:
        raise ValueError("topic_route needs exactly one of match_info, query_param or exact_key")

    def decorate(view: Any) -> Any:
        @functools.wraps(view)
        async def routed(web_: Any, request: web.Request, **kwargs: Any) -> web.StreamResponse:
            if exact_key is not None:
                raw: str | None = exact_key
            else:
                raw = request.match_info.get(match_info) if match_info else request.query.get(query_param or "")
            if raw is None:
                return error(400, f"missing key parameter {match_info or query_param!r}")
            forwarded = await route_topic_key(app, topic, decode_url_key(topic, raw), request)
            if forwarded is not None:
                return forwarded
            return await view(web_, request, **kwargs)

        return routed

    return decorate
