"""The ``/ui`` routes: pages rendered on the server with Jinja2 (autoescaped), forms for
the actions, static files from the package. Ids of tasks and users travel in the query
string, so any identifier the engine accepts has a URL."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib.resources
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, quote, urlencode

from litestar import Request, Response, route
from litestar.datastructures import Cookie
from litestar.enums import HttpMethod
from litestar.response import Redirect
from redis.exceptions import RedisError

from fairque.errors import FairqueError
from fairque.models import TaskState
from fairque.service import audit
from fairque.service.convert import engine_errors, invalid
from fairque.service.media import ProblemError
from fairque.service.scope import Scope
from fairque.service.ui import security, views
from fairque.service.ui.history import History
from fairque.service.ui.security import Denied
from fairque.service.ui.session import Sessions
from fairque.service.ui.templating import environment

if TYPE_CHECKING:
    from fairque.client.aio import AsyncFairQueue
    from fairque.service.app import Service

log = logging.getLogger("fairque.service.ui")

#: tasks one bulk action touches at most (it runs in batches of ``BULK_BATCH``)
BULK_LIMIT = 10_000
BULK_BATCH = 200
#: the largest form body read
FORM_LIMIT = 64 * 1024
#: where a POST's form is kept for its audit line (the request's ASGI state)
FORM_KEY = "fairque.form"
STATIC_TYPES = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}

#: queues the home page lists with their counts, at most
HOME_QUEUES = 200

Handler = Callable[..., Awaitable[Response[Any]]]
AnyRequest = Request[Any, Any, Any]


class Ui:
    """The dashboard of one ``Service``."""

    def __init__(self, service: Service) -> None:
        self.service = service
        secret = service.settings.session_secret
        self.sessions = Sessions(
            service.tokens,
            None if secret is None else secret.get_secret_value().encode(),
            service.settings.session_hours,
        )
        self.env = environment()
        self.history = History()
        self.static = {
            f.name: f.read_bytes()
            for f in importlib.resources.files("fairque.service.ui").joinpath("static").iterdir()
            if f.name.endswith(tuple(STATIC_TYPES))
        }

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Any) -> AsyncIterator[None]:
        """Sample the queues' counters for the overview while the app runs."""
        async with self.history.running(self.service.served):
            yield

    # rendering -------------------------------------------------------------------
    def render(
        self, request: AnyRequest, template: str, status: int = 200, **ctx: Any
    ) -> Response[str]:
        csrf, new = security.csrf_token(request)
        role = security.role_of(self.sessions, request)
        names = self.service.visible(self.service.names, self.scope(request))
        queue = ctx.pop("queue", None) or (names[0] if names else "")
        body = self.env.get_template(template).render(
            queue=queue,
            queues=names,
            role=role,
            can_act=role == "admin",
            login=self.service.tokens.enabled,
            csrf=csrf,
            msg=request.query_params.get("msg"),
            path=request.url.path,
            **ctx,
        )
        cookies = [_cookie(security.CSRF_COOKIE, csrf)] if new else []
        return Response(
            body,
            status_code=status,
            media_type="text/html",
            headers=security.HEADERS,
            cookies=cookies,
        )

    def error(self, request: AnyRequest, status: int, message: str) -> Response[Any]:
        if status == 401 and request.method == "GET":
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            return _redirect("/ui/login", next=target)
        return self.render(
            request, "error.html", status=status, status_code=status, message=message
        )

    async def form(self, request: AnyRequest) -> dict[str, str]:
        """The urlencoded form of a POST, CSRF checked."""
        raw = b""
        async for chunk in request.stream():
            raw += chunk
            if len(raw) > FORM_LIMIT:
                raise Denied(413, "the form is too large")
        form = {k: v[0] for k, v in parse_qs(raw.decode("utf-8", "replace")).items()}
        security.check_csrf(request, form)
        request.scope.setdefault("state", {})[FORM_KEY] = form  # for the audit line
        return form

    def scope(self, request: AnyRequest) -> Scope:
        """What the caller's token may reach."""
        return security.scope_of(self.sessions, request)

    async def queue(self, request: AnyRequest) -> AsyncFairQueue:
        return await self.service.queue(request.path_params["queue"], self.scope(request))

    # pages ----------------------------------------------------------------------
    async def home(self, request: AnyRequest) -> Response[Any]:
        """The queues served: one goes straight to its overview; else a list with
        each queue's counts (or, with none yet, how to make one)."""
        scope = self.scope(request)
        names = self.service.visible(await self.service.listed(), scope)
        if len(names) == 1:
            return _redirect(f"/ui/q/{quote(names[0], safe='')}")
        rows = []
        for name in names[:HOME_QUEUES]:
            q = await self.service.queue(name, scope)
            stats = await q.stats(user_limit=0)
            rows.append({"name": name, **{s.value: stats.counts.get(s, 0) for s in TaskState}})
        return self.render(
            request, "queues.html", page="queues", rows=rows, more=len(names) - len(rows),
            selection=self.service.selection, host=request.headers.get("host", "127.0.0.1:8000"),
        )  # fmt: skip

    async def static_file(self, request: AnyRequest) -> Response[Any]:
        name = request.path_params["name"]
        data = self.static.get(name)
        if data is None:
            return Response(b"not found", status_code=404, media_type="text/plain")
        media = STATIC_TYPES[name[name.rindex(".") :]]
        return Response(
            data, media_type=media, headers={**security.HEADERS, "Cache-Control": "max-age=300"}
        )

    async def login_page(self, request: AnyRequest) -> Response[Any]:
        return self.render(request, "login.html", next=_safe_next(request.query_params.get("next")))

    async def login(self, request: AnyRequest) -> Response[Any]:
        form = await self.form(request)
        target = _safe_next(form.get("next"))
        if not self.service.tokens.enabled:
            return _redirect(target)
        peer = request.client.host if request.client is not None else ""
        token = form.get("token", "").strip()
        entry, status, why = security.check_token(self.service.tokens, token, peer)
        if entry is None:
            return self.render(request, "login.html", status=status, next=target, failed=why)
        response = _redirect(target)
        secure = request.url.scheme == "https"
        session, seconds = self.sessions.issue(entry)
        response.set_cookie(_cookie(security.SESSION_COOKIE, session, secure, seconds))
        return response

    async def logout(self, request: AnyRequest) -> Response[Any]:
        await self.form(request)
        response = _redirect("/ui/login")
        response.delete_cookie(security.SESSION_COOKIE, path="/ui")
        return response

    async def overview(self, request: AnyRequest) -> Response[Any]:
        q = await self.queue(request)
        return self.render(
            request,
            "overview.html",
            queue=q.queue,
            page="overview",
            **await views.overview(q, self.history),
        )

    async def tenants(self, request: AnyRequest) -> Response[Any]:
        q = await self.queue(request)
        params = request.query_params
        window = _int(params.get("window"), 300)
        window = window if window in views.WINDOWS else 300
        data = await views.tenants(
            q,
            window=window,
            sort=params.get("sort") or "backlog",
            page=_int(params.get("page"), 1),
            user=params.get("user") or None,
        )
        data["service"] = await views.worker_time(q, await q.tenants(views.TENANT_ROWS))
        return self.render(request, "tenants.html", queue=q.queue, page="tenants", **data)

    async def set_fairness(self, request: AnyRequest) -> Response[Any]:
        q = await self.queue(request)
        form = await self.form(request)
        back = f"/ui/q/{q.queue}/tenants"
        mode = form.get("mode", "")
        try:
            before = await q.set_fairness(mode)  # type: ignore[arg-type]
        except FairqueError as exc:
            return _redirect(back, msg=f"not changed: {exc}")
        said = "worker time" if mode == "time" else "turns"
        return _redirect(back, msg=f"fair by {said}" + ("" if before == mode else " from now on"))

    async def tasks(self, request: AnyRequest) -> Response[Any]:
        q = await self.queue(request)
        filt = _filter(request)
        cursor = request.query_params.get("cursor") or None
        limit = min(max(_int(request.query_params.get("limit"), 50), 1), 500)
        data = await views.task_list(q, filt["state_"], filt["user"], filt["name"], cursor, limit)
        return self.render(
            request, "tasks.html", queue=q.queue, page="tasks", filt=filt, limit=limit, **data
        )

    async def task(self, request: AnyRequest) -> Response[Any]:
        q = await self.queue(request)
        task_id = request.query_params.get("id") or ""
        task = await q.get(task_id) if task_id else None
        if task is None:
            return self.error(request, 404, f"no task {task_id!r} in queue {q.queue!r}")
        page = await views.task_page(q, task)
        if not self.scope(request).payloads:  # a token that reads none
            page.update(payload=None, result=None)
        return self.render(request, "task.html", queue=q.queue, page="tasks", **page)

    async def workers(self, request: AnyRequest) -> Response[Any]:
        q = await self.queue(request)
        return self.render(
            request, "workers.html", queue=q.queue, page="workers", **await views.workers(q)
        )

    async def user(self, request: AnyRequest) -> Response[Any]:
        q = await self.queue(request)
        user_id = request.query_params.get("id") or ""
        if not user_id:
            return self.error(request, 404, "no user given")
        now, (load,) = await asyncio.gather(q.server_time_ms(), q.user_loads([user_id]))
        return self.render(
            request, "user.html", queue=q.queue, page="tenants", load=load,
            oldest_age=views.ago(now, load.oldest_ms),
            default_quota=q.options.max_queued_per_user,
            default_bytes=q.options.max_bytes_per_user,
        )  # fmt: skip

    # actions ----------------------------------------------------------------------
    async def task_action(self, request: AnyRequest) -> Response[Any]:
        q = await self.queue(request)
        form = await self.form(request)
        task_id, action = form.get("id", ""), request.path_params["action"]
        back = f"/ui/q/{q.queue}/task?" + urlencode({"id": task_id})
        try:
            if action == "retry":
                state = await q.retry(task_id)
                msg = f"queued again ({state.value})"
            else:
                msg = (
                    "canceled" if await q.cancel(task_id) else "not canceled: it has already ended"
                )
        except FairqueError as exc:
            msg = f"not done: {exc}"
        return _redirect(back, msg=msg)

    async def bulk_page(self, request: AnyRequest) -> Response[Any]:
        q = await self.queue(request)
        filt = _needs_state(_filter(request))
        action = _bulk_action(request.query_params.get("action"))
        if action == "cancel":
            ids, more = await views.matching_ids(
                q, filt["state_"], filt["user"], filt["name"], BULK_LIMIT
            )
            count = len(ids)
        else:  # dead letters: the engine counts them (its dry run)
            count, more = await _dead_letters(q, action, filt, dry_run=True), False
        return self.render(
            request, "bulk.html", queue=q.queue, page="tasks", filt=filt, action=action,
            count=count, more=more, limit=BULK_LIMIT,
        )  # fmt: skip

    async def bulk(self, request: AnyRequest) -> Response[Any]:
        q = await self.queue(request)
        form = await self.form(request)
        filt = _needs_state(_filter(request, form))
        action = _bulk_action(form.get("action"))
        if action == "cancel":
            ids, _ = await views.matching_ids(
                q, filt["state_"], filt["user"], filt["name"], BULK_LIMIT
            )
            done, total = 0, len(ids)
            for start in range(0, len(ids), BULK_BATCH):
                done += await _cancel_many(q, ids[start : start + BULK_BATCH])
        else:  # in the engine's batches, each one script
            done = total = await _dead_letters(q, action, filt, dry_run=False)
        verb = {"retry": "queued again", "delete": "deleted"}.get(action, "canceled")
        query = {k: v for k, v in filt.items() if k != "state_" and v}
        return _redirect(f"/ui/q/{q.queue}/tasks", msg=f"{done} of {total} tasks {verb}", **query)

    async def set_limits(self, request: AnyRequest) -> Response[Any]:
        q = await self.queue(request)
        form = await self.form(request)
        user_id = form.get("user", "")
        back = f"/ui/q/{q.queue}/user?" + urlencode({"id": user_id})
        cap_text = form.get("cap", "").strip()
        quota_text = form.get("quota", "").strip()
        bytes_text = form.get("bytes", "").strip()
        try:
            weight = int(form.get("weight", "1"))
            cap = int(cap_text) if cap_text else None
            quota = int(quota_text) if quota_text else None
            most = int(bytes_text) if bytes_text else None
            # the form shows every limit: an empty field removes that limit
            await q.set_user_limits(
                user_id, weight=weight, max_in_flight=cap or 0, max_queued=quota or 0,
                max_bytes=most or 0,
            )  # fmt: skip
        except (ValueError, FairqueError) as exc:
            return _redirect(back, msg=f"not changed: {exc}")
        shown = quota if quota is not None else "the queue's default"
        kept = most if most is not None else "the queue's default"
        return _redirect(
            back,
            msg=f"weight {weight}, cap {cap if cap is not None else 'none'}, backlog quota {shown},"
            f" byte quota {kept}",
        )

    def audit(self, request: AnyRequest, action: str, status: int) -> None:
        """The audit line of a dashboard action (``fairque.service.audit``)."""
        entry = security.caller(self.sessions, request)
        form = (request.scope.get("state") or {}).get(FORM_KEY) or {}
        audit.record(
            f"dashboard:{action}", token="-" if entry is None else entry.name,
            peer=request.client.host if request.client is not None else "", status=status,
            queue=request.path_params.get("queue"), tenant=form.get("user") or None,
            task=form.get("id") or None,
        )  # fmt: skip

    # wiring -------------------------------------------------------------------------
    def guard(self, handler: Handler, act: bool, open_: bool = False) -> Handler:
        """Auth, then the handler; engine and auth errors become error pages."""

        @functools.wraps(handler)
        async def guarded(request: AnyRequest) -> Response[Any]:
            try:
                if not open_:
                    security.require(self.sessions, request, act)
                with engine_errors():
                    response = await handler(request)
                if act:
                    self.audit(request, handler.__name__, response.status_code or 200)
                return response
            except Denied as exc:
                if exc.status == 403:
                    self.audit(request, handler.__name__, 403)
                return self.error(request, exc.status, exc.message)
            except ProblemError as exc:
                return self.error(
                    request, exc.problem.status, exc.problem.detail or exc.problem.title
                )
            except RedisError as exc:  # pragma: no cover - engine_errors maps these
                log.warning("dashboard: %s", exc)
                return self.error(request, 503, "the queue server did not answer")

        return guarded

    def handlers(self) -> list[Any]:
        """The Litestar route handlers of ``/ui``."""
        q_ = "/ui/q/{queue:str}"
        table: list[tuple[str, str, Handler, bool, bool]] = [
            ("GET", "/ui", self.home, False, False),
            ("GET", "/ui/static/{name:str}", self.static_file, False, True),
            ("GET", "/ui/login", self.login_page, False, True),
            ("POST", "/ui/login", self.login, False, True),
            ("POST", "/ui/logout", self.logout, False, True),
            ("GET", q_, self.overview, False, False),
            ("GET", q_ + "/tenants", self.tenants, False, False),
            ("GET", q_ + "/user", self.user, False, False),
            ("POST", q_ + "/user/limits", self.set_limits, True, False),
            ("POST", q_ + "/fairness", self.set_fairness, True, False),
            ("GET", q_ + "/tasks", self.tasks, False, False),
            ("GET", q_ + "/task", self.task, False, False),
            ("POST", q_ + "/task/{action:str}", self.task_action, True, False),
            ("GET", q_ + "/bulk", self.bulk_page, True, False),
            ("POST", q_ + "/bulk", self.bulk, True, False),
            ("GET", q_ + "/workers", self.workers, False, False),
        ]
        out = []
        for method, path, handler, act, open_ in table:
            guarded = self.guard(handler, act, open_)
            guarded.__name__ = f"ui_{handler.__name__}_{method.lower()}"
            out.append(
                route(path, http_method=[HttpMethod(method)], name=guarded.__name__)(guarded)
            )
        return out


def _bulk_action(value: Any) -> str:
    """A bulk action's name: ``retry`` and ``delete`` (of dead letters), else ``cancel``."""
    return value if value in ("retry", "delete") else "cancel"


async def _dead_letters(q: AsyncFairQueue, action: str, filt: dict[str, Any], dry_run: bool) -> int:
    """Retry the FAILED or CANCELED tasks the filter picks, or delete them (FINISHED ones
    too) (``bulk_retry`` / ``bulk_delete``); how many (with ``dry_run``: how many match)."""
    act = q.bulk_retry if action == "retry" else q.bulk_delete
    return await act(
        state=filt["state_"], name=filt["name"] or None, user_id=filt["user"] or None,
        dry_run=dry_run,
    )  # fmt: skip


async def _cancel_many(q: AsyncFairQueue, ids: list[str]) -> int:
    """Cancel one batch concurrently; how many were canceled (ended tasks are skipped)."""

    async def one(task_id: str) -> bool:
        try:
            return await q.cancel(task_id)
        except FairqueError:
            return False

    return sum(await asyncio.gather(*(one(task_id) for task_id in ids)))


def _cookie(key: str, value: str, secure: bool = False, max_age: int | None = None) -> Cookie:
    return Cookie(
        key=key, value=value, path="/ui", httponly=True, samesite="strict", secure=secure,
        max_age=max_age,
    )  # fmt: skip


def _redirect(path: str, **query: str) -> Response[Any]:
    joint = "&" if "?" in path else "?"
    target = path + (joint + urlencode(query) if query else "")
    return Redirect(target, status_code=303, headers=security.HEADERS)


def _safe_next(value: str | None) -> str:
    """Only a path of the dashboard: no other host, no scheme."""
    if value and value.startswith("/ui") and not value.startswith("//") and "\\" not in value:
        return value
    return "/ui"


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def _needs_state(filt: dict[str, Any]) -> dict[str, Any]:
    if filt["state_"] is None:
        raise invalid("state", "choose a state to act on")
    return filt


def _filter(request: AnyRequest, form: dict[str, str] | None = None) -> dict[str, Any]:
    source: Any = form if form is not None else request.query_params
    user, name = source.get("user") or None, source.get("name") or None
    state: TaskState | None
    try:
        state = TaskState(source.get("state") or "QUEUED")
    except ValueError:
        # any state: a user's or a name's tasks across states, or every task
        state = None
    return {"state": state.value if state else "ANY", "state_": state, "user": user, "name": name}
