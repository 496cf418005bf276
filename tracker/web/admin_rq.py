"""RQ's dashboard (rq-dashboard) under `/admin/rq`, for the admin alone, on the tracker's own Redis.

Who may open it: a request carrying `Authorization: Bearer <TRACKER_ADMIN_TOKEN>` (scripts, curl), or
a browser holding the session cookie that `POST /admin/rq/session` sets once the token is typed into
the small form every refused page shows. The token travels in that form's body, never in a URL: no
access log, proxy log, browser history or Referer ever holds it. The cookie is not the token either:
it is signed with it (itsdangerous), expires after `SESSION_SECONDS`, dies when the token changes, and
opens this dashboard only, never the API's admin endpoints. It is HttpOnly and SameSite=Strict, so
another site can neither read it nor make the browser send it with a forged request (the dashboard's
own buttons are POSTs). With no admin token configured the dashboard does not exist: 404.

The dashboard shows the queues, jobs and workers RQ keeps in Redis; the ledger, not Redis, says
what is pending (README, "What `POST /webhook` answers"), so the buttons that delete jobs or empty
queues are off: what they removed, the sweep would queue again.
"""

from __future__ import annotations

import hmac
from typing import Any

import rq_dashboard
from flask import Blueprint, Flask, Response, current_app, make_response, redirect, render_template_string, request
from itsdangerous import BadSignature, URLSafeTimedSerializer
from werkzeug.wrappers import Response as Redirect

from tracker.services import Services
from tracker.settings import Settings
from tracker.web.access import bearer_token, is_admin
from tracker.web.api import redis_shown
from tracker.web.context import services

PREFIX = "/admin/rq"
COOKIE = "tracker_admin_rq"
SESSION_SECONDS = 12 * 3600
_SALT = "tracker.web.admin_rq session"
_DASHBOARD = rq_dashboard.blueprint.name  # "rq_dashboard": its templates call url_for by this name

# The dashboard's page loads its own scripts and styles (served under PREFIX/static) and runs an inline
# script that polls its JSON endpoints; the app's policy (tracker.web.app.SECURITY_HEADERS) allows none
# of that. This one allows exactly that, from this host only.
DASHBOARD_POLICY = (
    "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self'; connect-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
NO_STORE = "no-store"

blueprint = Blueprint("admin_rq", __name__, url_prefix=PREFIX)


def init_app(app: Flask) -> None:
    """Mount the dashboard (and the token form) on `app`, behind the admin token."""
    app.config.update(
        RQ_DASHBOARD_DISABLE_DELETE=True,
        RQ_DASHBOARD_POLL_INTERVAL=2500,
        # Shown on the page only (the instance list); the connection is the tracker's own (_connect).
        RQ_DASHBOARD_REDIS_URL=(redis_shown(services_of(app).settings),),
    )
    app.register_blueprint(blueprint)
    app.register_blueprint(rq_dashboard.blueprint, url_prefix=PREFIX)
    # Before the dashboard's own hook (which would open a new Redis client from a URL on every request):
    # the guard first, then the tracker's connection, and nothing else.
    app.before_request_funcs[_DASHBOARD] = [_guard, _connect]
    app.after_request_funcs.setdefault(_DASHBOARD, []).append(_dashboard_headers)
    # The dashboard's page asks for the app's `static` favicon, which this app has not: its own.
    app.url_build_error_handlers.append(_favicon)


def services_of(app: Flask) -> Services:
    with app.app_context():
        return services()


# --- who may open it -------------------------------------------------------------------------------


def _guard() -> Response | None:
    settings = services().settings
    if settings.admin_token is None:
        return _refused(404, "the RQ dashboard is off: set TRACKER_ADMIN_TOKEN to open it")
    bearer = bearer_token(request.headers.get("Authorization"))
    if bearer is not None:
        if is_admin(settings, bearer):
            return None
        return _refused(403, "the bearer token is not TRACKER_ADMIN_TOKEN")
    if _valid_session(settings, request.cookies.get(COOKIE)):
        return None
    return _refused(401, "type TRACKER_ADMIN_TOKEN to open the RQ dashboard", form=True)


def _valid_session(settings: Settings, cookie: str | None) -> bool:
    if not cookie or settings.admin_token is None:
        return False
    try:
        said = _sessions(settings).loads(cookie, max_age=SESSION_SECONDS)
    except BadSignature:  # tampered, expired, or signed with an earlier token
        return False
    return bool(said == "admin")


def _sessions(settings: Settings) -> URLSafeTimedSerializer:
    assert settings.admin_token is not None
    return URLSafeTimedSerializer(settings.admin_token.get_secret_value(), salt=_SALT)


@blueprint.post("/session")
def open_session() -> Response | Redirect:
    """The form's target: a right token sets the cookie and goes to the dashboard (303, so a reload
    does not post the token again); a wrong one is the form again, 403."""
    settings = services().settings
    if settings.admin_token is None:
        return _refused(404, "the RQ dashboard is off: set TRACKER_ADMIN_TOKEN to open it")
    typed = request.form.get("token", "")
    if not typed or not hmac.compare_digest(typed.encode(), settings.admin_token.get_secret_value().encode()):
        return _refused(403, "that is not TRACKER_ADMIN_TOKEN", form=True)
    answer = redirect(f"{PREFIX}/", 303)
    answer.set_cookie(
        COOKIE,
        _sessions(settings).dumps("admin"),
        max_age=SESSION_SECONDS,
        path=PREFIX,
        secure=request.is_secure,  # behind the TLS proxy (X-Forwarded-Proto), never sent in clear
        httponly=True,
        samesite="Strict",
    )
    answer.headers["Cache-Control"] = NO_STORE
    return answer


@blueprint.post("/session/end")
def end_session() -> Redirect:
    answer = redirect(f"{PREFIX}/", 303)
    answer.delete_cookie(COOKIE, path=PREFIX, httponly=True, samesite="Strict")
    return answer


_FORM = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>RQ dashboard: admin token</title></head>
<body style="font-family: sans-serif; max-width: 36em; margin: 4em auto">
<h1>RQ dashboard</h1>
<p>{{ message }}</p>
{% if form %}
<form method="post" action="{{ prefix }}/session">
<label>TRACKER_ADMIN_TOKEN <input type="password" name="token" autocomplete="current-password" autofocus></label>
<button type="submit">Open</button>
</form>
{% endif %}
</body></html>
"""


def _refused(status: int, message: str, *, form: bool = False) -> Response:
    if request.path.endswith(".json"):  # the page's polling, or a script
        answer = make_response({"error": message}, status)
    else:
        answer = make_response(render_template_string(_FORM, message=message, form=form, prefix=PREFIX), status)
    if status == 401:
        answer.headers["WWW-Authenticate"] = 'Bearer realm="tracker"'
    answer.headers["Cache-Control"] = NO_STORE
    return answer


# --- the dashboard on the tracker's Redis ----------------------------------------------------------


def _connect() -> Response | None:
    """The dashboard reads `current_app.redis_conn`: the tracker's connection (REDIS_URL, or the
    embedded server), set per request as its own hook would. It knows one Redis: instance 0."""
    instance = (request.view_args or {}).get("instance_number")
    if instance not in (None, 0):
        return _refused(404, "this dashboard shows the tracker's one Redis: instance 0")
    current_app.redis_conn = services().require_redis()  # type: ignore[attr-defined]
    return None


def _dashboard_headers(response: Response) -> Response:
    response.headers["Content-Security-Policy"] = DASHBOARD_POLICY
    response.headers.setdefault("Cache-Control", NO_STORE)
    return response


def _favicon(error: Exception, endpoint: str, values: dict[str, Any]) -> str:
    if endpoint == "static" and values.get("filename") == "favicon.ico":
        return f"{PREFIX}/static/favicon.ico"
    raise error  # not ours: Flask tries its next handler, then raises it
