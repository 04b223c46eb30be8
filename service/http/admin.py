"""The admin calendar (R-H4): a server-rendered page for the people who operate pgwake.

Routes (HTML, outside the JSON API and its OpenAPI document):

- ``GET /admin/login``, ``POST /admin/login``: exchange an API token for a
  session cookie (HttpOnly, SameSite=Strict, Secure unless configured off).
- ``POST /admin/logout``.
- ``GET /admin/calendar``: the next 14 days and the last 24 hours
  (:mod:`service.calendar`); needs ``read``, through the session or a bearer token.
- ``POST /admin/calendar/{skip,retry,cancel,requeue}``: the page's controls. Each
  needs ``admin``, the session's CSRF token and a same-origin request, and runs
  the same compare-and-set as the JSON API (R-H6): acting on a row that has
  since moved answers 409 and changes nothing.

The page works without JavaScript; ``/admin/static/admin.js`` only preselects the
browser's zone at login and applies the zone selector at once. Every response
carries a strict Content-Security-Policy (no inline script or style).
"""

from __future__ import annotations

import importlib.resources
import re
import time
import zoneinfo
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from functools import cache
from typing import Annotated, Any, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit

import jinja2
import pydantic
from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from service import calendar, recurrence, sessions
from service.engine import Engine
from service.errors import Conflict, NotFound, PayloadTooLarge, PgwakeError
from service.http.body import read_limited
from service.http.models import NAME_PATTERN
from service.tokens import authenticate

#: The session cookie. When Secure, the ``__Host-`` prefix makes browsers refuse a
#: cookie of that name set by another site or path (RFC 6265bis §4.1.3.2), so none
#: can be planted beside ours; without Secure the prefix is not allowed.
COOKIE = "__Host-pgwake_session"
COOKIE_INSECURE = "pgwake_session"
#: How many cookies of our name one request may present; each is tried.
MAX_SESSION_COOKIES = 4
LOGIN = "/admin/login"
CALENDAR = "/admin/calendar"
#: The last first day a window can have (its 14 days must end before year 10000).
LAST_START = date(9999, 12, 1)
#: Filter and view parameters a redirect back to the calendar keeps.
VIEW_KEYS = ("tz", "start", "queue", "schedule", "event_type", "status")
SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
    "x-frame-options": "DENY",
}
#: What a redirect's ``done`` code tells the operator (fixed texts: nothing reflected).
NOTICES = {
    "skipped": "The occurrence was skipped; it will not fire.",
    "retried": "The event is pending again; the dispatcher picks it up now.",
    "cancelled": "The event was cancelled.",
    "requeued": "The message was re-queued for delivery.",
}
STATIC = {"admin.css": "text/css; charset=utf-8", "admin.js": "text/javascript; charset=utf-8"}

Handler = Callable[[Request], Awaitable[Response]]


# -- input models ----------------------------------------------------------------------


def _blank_to_none(value: object) -> object:
    return None if value == "" else value


_Name = Annotated[
    Annotated[str, Field(pattern=NAME_PATTERN)] | None, pydantic.BeforeValidator(_blank_to_none)
]


class CalendarQuery(BaseModel):
    """``GET /admin/calendar`` parameters; empty form fields mean "any"."""

    model_config = ConfigDict(extra="ignore", regex_engine="python-re")

    tz: Annotated[str | None, pydantic.BeforeValidator(_blank_to_none)] = None
    start: Annotated[
        date | None, pydantic.BeforeValidator(_blank_to_none), Field(le=LAST_START)
    ] = None
    queue: _Name = None
    schedule: _Name = None
    event_type: Annotated[
        Annotated[str, Field(min_length=1, max_length=256, pattern=r"^[^\x00-\x1f\x7f]*$")] | None,
        pydantic.BeforeValidator(_blank_to_none),
    ] = None
    status: Annotated[
        Literal["scheduled", "fired", "dispatched", "failed", "dead"] | None,
        pydantic.BeforeValidator(_blank_to_none),
    ] = None
    done: str | None = None

    @pydantic.field_validator("tz")
    @classmethod
    def _zone(cls, value: str | None) -> str | None:
        if value is not None and value not in _zones():
            raise ValueError(f"{value!r} is not an IANA time zone this page offers")
        return value


class _Form(BaseModel):
    model_config = ConfigDict(extra="ignore", regex_engine="python-re")
    csrf: Annotated[str, Field(max_length=128)]
    back: Annotated[str, Field(max_length=4096)] = ""


class SkipForm(_Form):
    """``occurrence`` = ``<schedule>@<UTC instant>``, as the page's Skip buttons send it."""

    occurrence: Annotated[str, Field(max_length=256)]

    @property
    def schedule(self) -> str:
        return self.occurrence.rpartition("@")[0]

    @property
    def instant(self) -> datetime:
        return datetime.fromisoformat(self.occurrence.rpartition("@")[2])

    @pydantic.field_validator("occurrence")
    @classmethod
    def _split(cls, value: str) -> str:
        name, at, instant = value.rpartition("@")
        if not at or not re.fullmatch(NAME_PATTERN, name):
            raise ValueError("must be <schedule>@<instant>")
        try:
            parsed = datetime.fromisoformat(instant)
        except ValueError:
            raise ValueError(f"{instant!r} is not an ISO 8601 instant") from None
        if parsed.tzinfo is None:
            raise ValueError(f"{instant!r} has no UTC offset")
        return value


def _digits(value: object) -> object:
    if not (isinstance(value, str) and value.isascii() and value.isdigit()):
        raise ValueError("must be a positive integer in decimal digits")
    return value


_Id = Annotated[int, pydantic.BeforeValidator(_digits), Field(ge=1, le=2**63 - 1)]


class EventForm(_Form):
    event: _Id


class RequeueForm(_Form):
    outbox: Annotated[str, Field(pattern=NAME_PATTERN)]
    message: _Id


# -- rendering -------------------------------------------------------------------------


@cache
def _templates() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("service", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["visible"] = visible
    return env


#: Control characters and bidirectional overrides (which can make rendered text
#: read differently from what is stored) are shown as ``<U+XXXX>``.
_INVISIBLE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def visible(value: object) -> str:
    """User text as it may safely be shown: every control or bidi character spelled
    out. Escaping for HTML stays the template's (autoescape)."""
    if value is None:
        return ""
    return _INVISIBLE.sub(lambda m: f"<U+{ord(m.group()):04X}>", str(value))


@cache
def _zones() -> tuple[str, ...]:
    return tuple(sorted(zoneinfo.available_timezones() - {"Factory", "localtime"}))


@cache
def _static(name: str) -> bytes:
    return (importlib.resources.files("service") / "static" / name).read_bytes()


def _html(template: str, status: int = 200, **context: Any) -> HTMLResponse:
    body = _templates().get_template(template).render(**context)
    return HTMLResponse(body, status_code=status, headers=SECURITY_HEADERS)


def _message(request: Request, status: int, title: str, detail: str) -> HTMLResponse:
    """An error page: the HTML counterpart of a problem document (RFC 9457)."""
    return _html("message.html", status, title=title, detail=detail, calendar=CALENDAR)


def _engine(request: Request) -> Engine:
    engine: Engine = request.app.state.engine
    return engine


def _cookie_secure(request: Request) -> bool:
    return bool(getattr(request.app.state, "cookie_secure", True))


def _cookie_name(request: Request) -> str:
    return COOKIE if _cookie_secure(request) else COOKIE_INSECURE


def _session_ids(request: Request) -> list[str]:
    """Every value of the session cookie in the raw ``Cookie`` header, in order.

    Starlette keeps only the last of several cookies of one name; a second cookie
    (say, planted with a broader path) must not hide or replace the real one.
    """
    name = _cookie_name(request)
    out: list[str] = []
    for header in request.headers.getlist("cookie"):
        for part in header.split(";"):
            key, sep, value = part.strip().partition("=")
            if sep and key == name and value:
                out.append(value.strip('"'))
    return out[:MAX_SESSION_COOKIES]


def _same_origin(request: Request) -> bool:
    """False for a cross-site form post (Fetch Metadata, then the Origin header)."""
    if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        return False
    origin = request.headers.get("origin")
    # The host only: behind a TLS-terminating proxy the scheme seen here is http.
    return origin is None or urlsplit(origin).netloc == request.headers.get("host")


# -- authentication --------------------------------------------------------------------


@dataclass(frozen=True)
class Viewer:
    """Who is looking: from the session cookie (with its CSRF token) or a bearer token."""

    name: str
    permissions: frozenset[str]
    csrf: str | None = None
    timezone: str | None = None


async def _viewer(request: Request) -> Viewer | None:
    pool = _engine(request).pool
    for session_id in _session_ids(request):
        session = await sessions.get_session(pool, session_id)
        if session is not None:
            request.state.session_id = session_id
            return Viewer(
                name=session.token_name,
                permissions=session.permissions,
                csrf=session.csrf_token,
                timezone=session.timezone,
            )
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        found = await authenticate(pool, token.strip())
        if found is not None:
            return Viewer(name=found[0], permissions=found[1])
    return None


async def login_page(request: Request) -> Response:
    """``GET /admin/login``: the form; a live session goes straight to the calendar."""
    if await _viewer(request) is not None:
        return RedirectResponse(CALENDAR, 303)
    return _login(request)


def _login(request: Request, status: int = 200, error: str | None = None) -> HTMLResponse:
    insecure = (
        _cookie_secure(request)
        and request.url.scheme != "https"
        and request.url.hostname not in ("localhost", "127.0.0.1", "::1", "[::1]")
    )
    return _html("login.html", status, error=error, insecure=insecure, action=LOGIN)


async def login(request: Request) -> Response:
    """``POST /admin/login`` (form ``token``, optional ``tz``): open a session.

    Answers 303 to the calendar with the cookie set; 401 for an unknown or revoked
    token and 403 for one without ``read``, re-showing the form; 403 cross-site.
    """
    if not _same_origin(request):
        return _message(request, 403, "Cross-site request refused", "Log in from this site.")
    try:
        form = await _read_form(request)
    except _BadForm as exc:
        return _message(request, exc.status, "Invalid form", exc.detail)
    token = form.get("token", "").strip()
    tz = form.get("tz") or None
    if tz is not None:
        try:
            recurrence.zone(tz)
        except recurrence.InvalidTimezone:
            tz = None
    pool = _engine(request).pool
    await sessions.prune_sessions(pool, 100)
    found = await authenticate(pool, token)
    if found is None:
        return _login(request, 401, "That token is unknown or revoked.")
    if "read" not in found[1]:
        return _login(request, 403, f"Token {found[0]!r} lacks the 'read' permission.")
    opened = await sessions.open_session(
        pool, token, timezone=tz, ttl=request.app.state.session_ttl
    )
    if opened is None:  # revoked between the two statements
        return _login(request, 401, "That token is unknown or revoked.")
    for old in _session_ids(request):  # a new login replaces the browser's old session
        await sessions.close_session(pool, old)
    response = RedirectResponse(CALENDAR, 303)
    response.set_cookie(
        _cookie_name(request),
        opened[0],
        max_age=int(request.app.state.session_ttl),
        path="/",
        secure=_cookie_secure(request),
        httponly=True,
        samesite="strict",
    )
    return response


async def logout(request: Request) -> Response:
    """``POST /admin/logout`` (form ``csrf``): end the session and clear the cookie."""
    viewer = await _viewer(request)
    try:
        form = await _read_form(request)
    except _BadForm as exc:
        return _message(request, exc.status, "Invalid form", exc.detail)
    if viewer is not None and (not _same_origin(request) or not _csrf_ok(viewer, form.get("csrf"))):
        return _message(request, 403, "Refused", "The form was stale or came from another site.")
    for session_id in _session_ids(request):
        await sessions.close_session(_engine(request).pool, session_id)
    response = RedirectResponse(LOGIN, 303)
    response.delete_cookie(
        _cookie_name(request), path="/", secure=_cookie_secure(request), httponly=True
    )
    return response


#: Largest form body accepted (bytes); the page's forms send well under 1 KiB.
MAX_FORM_BYTES = 16 * 1024
MAX_FORM_FIELDS = 20


class _BadForm(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


async def _read_form(request: Request) -> dict[str, str]:
    """The ``application/x-www-form-urlencoded`` body as a dict (first value wins),
    read while streaming and capped at MAX_FORM_BYTES.

    Raises:
        _BadForm: 415 another content type, 413 too large, 400 not UTF-8 or too many fields.
    """
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/x-www-form-urlencoded":
        raise _BadForm(415, f"expected a form (application/x-www-form-urlencoded), got {ctype!r}")
    try:
        raw = await read_limited(request, MAX_FORM_BYTES)
        pairs = parse_qsl(
            raw.decode("ascii"),
            keep_blank_values=True,
            encoding="utf-8",
            errors="strict",
            max_num_fields=MAX_FORM_FIELDS,
        )
    except PayloadTooLarge as exc:
        raise _BadForm(413, str(exc)) from None
    except (UnicodeDecodeError, ValueError, PgwakeError):
        raise _BadForm(400, "the form is not valid URL-encoded UTF-8") from None
    form: dict[str, str] = {}
    for key, value in pairs:
        form.setdefault(key, value)
    return form


def _csrf_ok(viewer: Viewer, sent: object) -> bool:
    if viewer.csrf is None or not isinstance(sent, str):
        return False
    return sessions.Session(viewer.name, viewer.permissions, viewer.csrf, None).csrf_ok(sent)


# -- the page --------------------------------------------------------------------------


async def calendar_page(request: Request) -> Response:
    """``GET /admin/calendar``: needs ``read``; without a session, 303 to the login form.

    Query: ``tz`` (IANA zone; default the zone the browser sent at login, else UTC),
    ``start`` (YYYY-MM-DD, the first local day, not before today), ``queue``,
    ``schedule``, ``event_type``, ``status`` (scheduled, fired, dispatched, failed,
    dead). A bad value answers 422 with what was wrong. The ``Server-Timing``
    header reports the database and render times in milliseconds.
    """
    began = time.perf_counter()
    viewer = await _viewer(request)
    if viewer is None:
        return RedirectResponse(LOGIN, 303)
    if "read" not in viewer.permissions:
        return _message(
            request, 403, "Forbidden", f"Token {viewer.name!r} lacks the 'read' permission."
        )
    try:
        query = CalendarQuery.model_validate(dict(request.query_params))
    except pydantic.ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors(include_url=False)
        )
        return _message(request, 422, "Invalid calendar parameters", problems)
    zone = query.tz or viewer.timezone or "UTC"
    filters = calendar.Filters(query.queue, query.schedule, query.event_type, query.status)
    cal = await calendar.load_calendar(
        _engine(request).pool, zone=zone, start=query.start, filters=filters
    )
    loaded = time.perf_counter()
    view = {k: v for k in VIEW_KEYS if (v := request.query_params.get(k))}
    response = _html(
        "calendar.html",
        cal=cal,
        viewer=viewer,
        can_act=viewer.csrf is not None and "admin" in viewer.permissions,
        filters=filters,
        query=query,
        zone=zone,
        zones=_zones(),
        notice=NOTICES.get(query.done or ""),
        back=urlencode(view),
        link=lambda **changes: CALENDAR + "?" + urlencode(_changed(view, changes)),
        fmt=_Formatter(recurrence.zone(zone)),
        statuses=calendar.STATUSES,
    )
    rendered = time.perf_counter()
    response.headers["server-timing"] = (
        f"db;dur={(loaded - began) * 1000:.1f}, render;dur={(rendered - loaded) * 1000:.1f}, "
        f"total;dur={(rendered - began) * 1000:.1f}"
    )
    return response


def _view(back: str) -> dict[str, str]:
    """The view keys of a control's ``back`` field, or none when they would not
    render (the action is done either way, and its notice must show)."""
    view = {k: v for k, v in parse_qsl(back) if k in VIEW_KEYS}
    try:
        CalendarQuery.model_validate(view)
    except pydantic.ValidationError:
        return {}
    return view


def _changed(view: dict[str, str], changes: dict[str, Any]) -> dict[str, str]:
    out = {**view, **{k: str(v) for k, v in changes.items() if v is not None}}
    return {k: v for k, v in out.items() if k not in changes or changes[k] is not None}


class _Formatter:
    """Instants shown in the viewer's zone, with the item's own zone on hover."""

    def __init__(self, zone: zoneinfo.ZoneInfo) -> None:
        self.zone = zone

    def time(self, at: datetime) -> str:
        """``HH:MM``, or ``HH:MM:SS`` for an instant off the whole minute."""
        local = at.astimezone(self.zone)
        return local.strftime("%H:%M:%S" if local.second or local.microsecond else "%H:%M")

    def when(self, at: datetime) -> str:
        return at.astimezone(self.zone).strftime("%a %d %b ") + self.time(at)

    def own(self, at: datetime, zone: str) -> str:
        local = at.astimezone(recurrence.zone(zone))
        return f"{local:%Y-%m-%d %H:%M} {local.tzname()} ({zone})"

    def iso(self, at: datetime) -> str:
        return at.astimezone(UTC).isoformat().replace("+00:00", "Z")

    def day(self, d: date) -> str:
        return d.strftime("%a %d %b")


# -- controls --------------------------------------------------------------------------


def _control(model: type[_Form], act: Callable[[Engine, Any], Awaitable[str]]) -> Handler:
    async def control(request: Request) -> Response:
        viewer = await _viewer(request)
        if viewer is None or viewer.csrf is None:
            return _message(request, 401, "Not logged in", "Log in again to act on the calendar.")
        if not _same_origin(request):
            return _message(request, 403, "Cross-site request refused", "Act from this site.")
        try:
            form = await _read_form(request)
        except _BadForm as exc:
            return _message(request, exc.status, "Invalid form", exc.detail)
        if not _csrf_ok(viewer, form.get("csrf")):
            return _message(request, 403, "Stale form", "Reload the calendar and try again.")
        if "admin" not in viewer.permissions:
            return _message(
                request, 403, "Forbidden", f"Token {viewer.name!r} lacks the 'admin' permission."
            )
        try:
            parsed = model.model_validate(form)
        except pydantic.ValidationError as exc:
            detail = "; ".join(
                f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors(include_url=False)
            )
            return _message(request, 422, "Invalid form", detail)
        try:
            done = await act(_engine(request), parsed)
        except Conflict as exc:
            return _message(request, 409, "Nothing changed", f"{exc} (someone acted first).")
        except NotFound as exc:
            return _message(request, 404, "Not found", str(exc))
        except PgwakeError as exc:
            return _message(request, exc.status, "Refused", str(exc))
        return RedirectResponse(
            CALENDAR + "?" + urlencode({**_view(parsed.back), "done": done}), 303
        )

    return control


async def _skip(engine: Engine, form: SkipForm) -> str:
    await engine.schedules.skip(form.schedule, form.instant)
    return "skipped"


async def _retry(engine: Engine, form: EventForm) -> str:
    await engine.events.retry(form.event)
    return "retried"


async def _cancel(engine: Engine, form: EventForm) -> str:
    await engine.events.cancel(form.event)
    return "cancelled"


async def _requeue(engine: Engine, form: RequeueForm) -> str:
    await engine.outbox(form.outbox).requeue(form.message)
    return "requeued"


async def static_file(request: Request) -> Response:
    """``GET /admin/static/{name}``: the page's stylesheet and script (public)."""
    name = request.path_params["name"]
    if name not in STATIC:
        return Response(status_code=404)
    return Response(
        _static(name),
        media_type=STATIC[name],
        headers={"cache-control": "max-age=300", "x-content-type-options": "nosniff"},
    )


async def admin_root(request: Request) -> Response:
    return RedirectResponse(CALENDAR, 303)


#: The admin routes: every one but the login form and the static files needs a session.
ROUTES: list[Route] = [
    Route("/admin", admin_root, methods=["GET"]),
    Route(LOGIN, login_page, methods=["GET"]),
    Route(LOGIN, login, methods=["POST"]),
    Route("/admin/logout", logout, methods=["POST"]),
    Route(CALENDAR, calendar_page, methods=["GET"]),
    Route(CALENDAR + "/skip", _control(SkipForm, _skip), methods=["POST"]),
    Route(CALENDAR + "/retry", _control(EventForm, _retry), methods=["POST"]),
    Route(CALENDAR + "/cancel", _control(EventForm, _cancel), methods=["POST"]),
    Route(CALENDAR + "/requeue", _control(RequeueForm, _requeue), methods=["POST"]),
    Route("/admin/static/{name}", static_file, methods=["GET"]),
]
