"""The worker's web server (aiohttp): user pages, table queries, health, readiness, metrics.

Bound to 127.0.0.1 unless configured. Every failure answers JSON with a status code (400 bad
key, 401 bad token, 404 unknown table or key, 503 not ready) — never a traceback page; a view
that raises is logged and answers 500 without affecting the worker.
"""
from __future__ import annotations

import hmac
import logging
from typing import TYPE_CHECKING, Any

from aiohttp import web

from ..models.record import dumps
from ..settings import Secret
from .binding import Listeners, bind_web
from .metrics import Metrics
from .routing import decode_url_key, error, route_key

if TYPE_CHECKING:
    from ..types.app import AppProtocol

log = logging.getLogger("streamkit.web")


class Web:
    """What a view gets as its first argument: response helpers."""

    @staticmethod
    def json(obj: Any, status: int = 200) -> web.Response:
        return web.Response(body=dumps(obj), status=status, content_type="application/json")

    @staticmethod
    def text(body: str, status: int = 200) -> web.Response:
        return web.Response(text=body, status=status)


class WebServer:
    def __init__(self, app: "AppProtocol") -> None:
        self.app = app
        conf = app.conf
        self.url = conf.web_url
        self.metrics = Metrics(app)
        self._runner: web.AppRunner | None = None
        self.helper = Web()

    def build(self) -> web.Application:
        application = web.Application(middlewares=[self._errors, self._auth],
                                      client_max_size=self.app.conf.web_max_request_size)
        application.router.add_get("/health", self.health)
        application.router.add_get("/ready", self.ready)
        application.router.add_get("/metrics", self.metrics_view)
        application.router.add_get("/stats", self.stats)
        application.router.add_get("/tables", self.tables)
        application.router.add_get("/tables/{name}/{key}", self.table_key)
        for path, view in self.app.pages:
            application.router.add_route("*", path, self._page(view))
        return application

    def _page(self, view: Any) -> Any:
        sensors = self.app.sensors

        async def handler(request: web.Request) -> web.StreamResponse:
            if not sensors.active:
                return await view(self.helper, request, **request.match_info)
            states = sensors.call("on_web_request_start", self.app, request, view=view)
            response = None
            try:
                response = await view(self.helper, request, **request.match_info)
                return response
            finally:
                sensors.call_each("on_web_request_end", states, self.app, request, response, view=view)

        return handler

    @web.middleware
    async def _errors(self, request: web.Request, handler: Any) -> web.StreamResponse:
        try:
            return await handler(request)
        except web.HTTPException as exc:
            if exc.content_type == "application/json":
                raise
            return error(exc.status, exc.reason)
        except Exception as exc:
            log.exception("web view %s failed", request.path)
            return error(500, f"{type(exc).__name__}: {exc}")

    @web.middleware
    async def _auth(self, request: web.Request, handler: Any) -> web.StreamResponse:
        token = self.app.conf.web_auth_token
        secret = token.reveal() if isinstance(token, Secret) else token
        if token and not hmac.compare_digest(request.headers.get("Authorization", "").encode(),
                                             f"Bearer {secret}".encode()):  # constant time
            return error(401, "missing or wrong bearer token")
        return await handler(request)

    async def start(self, listeners: Listeners | None = None) -> None:
        """Serve on ``listeners`` (bound before the worker joined its group), else bind now."""
        listeners = listeners or bind_web(self.app.conf)
        self._runner = web.AppRunner(self.build(), access_log=None)
        await self._runner.setup()
        for sock in listeners.sockets:
            await web.SockSite(self._runner, sock, ssl_context=listeners.ssl_context).start()
        log.info("web server on %s", self.url)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- built-in views -------------------------------------------------------------------------

    async def health(self, request: web.Request) -> web.Response:
        runtime = self.app.runtime
        if runtime is None or runtime.fatal is not None:
            return error(503, "worker is not running" if runtime is None else f"halted: {runtime.fatal}")
        return Web.json({"status": "ok"})

    async def ready(self, request: web.Request) -> web.Response:
        runtime = self.app.runtime
        tables = runtime.tables if runtime is not None else None
        progress = tables.progress if tables is not None else None
        watch = runtime.broker_watch if runtime is not None else None
        broker_ok = watch is None or watch.reachable
        tasks = runtime.tasks if runtime is not None else None
        ready = bool(runtime is not None and runtime.fatal is None and (tables is None or tables.ready)
                     and tasks is not None and tasks.running and broker_ok)
        failed = {name: str(agent.failure) for name, agent in self.app.agents.items() if agent.failure is not None}
        # a crash loop is not ready while it backs off: it processes nothing until it starts again
        restarting = {name: agent.restarting for name, agent in self.app.agents.items() if agent.restarting}
        ready = ready and not failed and not restarting
        body: dict[str, Any] = {"ready": ready}
        if failed:
            body["failed_agents"] = failed
        if restarting:
            body["restarting_agents"] = restarting
        if tasks is not None:
            body.update(tasks.describe(progress.per_partition if progress is not None else None))
        if not broker_ok:
            assert watch is not None  # the broker is reported down by a watch only
            body["broker"] = {"reachable": False, "down_for_s": round(watch.down_for, 1), "error": watch.last_error}
        if progress is not None and progress.active:
            body["recovery"] = {"done": progress.done, "total": progress.total, "rate": round(progress.rate, 1),
                                "eta_s": progress.eta}
        return Web.json(body, 200 if ready else 503)

    async def stats(self, request: web.Request) -> web.Response:
        """Faust's Monitor counters as JSON, once the app has one (``app.monitor``)."""
        from ..sensors import Monitor

        monitor = next((s for s in self.app.sensors if isinstance(s, Monitor)), None)
        if monitor is None:
            return error(404, "no Monitor: use app.monitor (or app.sensors.add(faust.Monitor())) before the worker "
                              "starts; /metrics has the worker's Prometheus metrics")
        return Web.json(monitor.asdict())

    async def metrics_view(self, request: web.Request) -> web.Response:
        body, content_type = self.metrics.render()
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def tables(self, request: web.Request) -> web.Response:
        return Web.json({
            name: {"partitions": t.partitions, "store": t.store_url, "changelog": t.changelog.name,
                   "global": t.is_global, "local_partitions": sorted(t.local)}
            for name, t in self.app.tables.items()
        })

    async def table_key(self, request: web.Request) -> web.Response:
        table = self.app.tables.get(request.match_info["name"])
        if table is None:
            return error(404, f"no table named {request.match_info['name']!r}")
        key = decode_url_key(table, request.match_info["key"])
        routed = await route_key(self.app, table, key, request)
        if routed is not None:
            return routed
        if table.window is not None:  # windowed: every stored window, or the one ``at`` falls in
            return self._windows(table, key, request.query.get("at"))
        value = table.get(key, _ABSENT)
        if value is _ABSENT:
            return error(404, f"key {key!r} not in table {table.name!r}", key=key)
        return Web.json({"key": key, "value": value})


    @staticmethod
    def _windows(table: Any, key: Any, at: str | None) -> web.Response:
        windows = [{"start": w.start, "end": w.end, "value": v} for w, v in table.windows_of(key)]
        if at is not None:
            try:
                when = int(at) / 1000
            except ValueError:
                return error(400, f"at={at!r} is not epoch milliseconds")
            windows = [w for w in windows if table.window.holds(w["start"], w["end"], when)]
        if not windows:
            return error(404, f"key {key!r} has no window{'' if at is None else ' at ' + at} in table {table.name!r}",
                         key=key)
        return Web.json({"key": key, "windows": windows})


_ABSENT = object()
