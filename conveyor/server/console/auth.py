"""The console's sign-in: sessions, CSRF tokens, and the cookies and forms they travel in.

A browser signs in once with an access key id and its secret key and gets a session
cookie that carries its own proof: signed with a key derived from that access key's
secret, it is good on every node configured with the same key, and across restarts, until
it expires or the secret changes (sessions.py, which also says what sign-out can and
cannot reach: it ends the session on the node that received it, not on the others).

Cookies are `HttpOnly` (no script reads them), `SameSite=Strict` (a browser sends them only
with requests that a page of the same site starts; RFC 6265bis, draft-ietf-httpbis-
rfc6265bis, "The SameSite Attribute") and `Path=/console`, with `Max-Age`; `Secure` too
when the request came over https. RFC 6265bis calls SameSite defence in depth against
CSRF, not a replacement for it ("SameSite Cookies" in its security considerations), so
every state-changing request also carries a CSRF token in a form field that must match
the session's (derived from the session cookie: sessions.py), or, before there is a
session (the sign-in form), the CSRF cookie's (double submit), and a foreign Origin header
is refused.
"""

from __future__ import annotations

import hmac
import logging
import re
import secrets
from collections.abc import Callable
from html import escape
from urllib.parse import parse_qsl, quote, urlsplit

from conveyor.server.console.frame import PREFIX, redirect, render
from conveyor.server.console.sessions import (
    MAX_COOKIE_CHARS,
    MAX_KEY_ID_BYTES,
    Session,
    SessionCookies,
)
from conveyor.server.http import Request, Response
from conveyor.service.signins import SignInThrottle

log = logging.getLogger(__name__)

SIGN_IN = PREFIX + "/sign-in"
SIGN_OUT = PREFIX + "/sign-out"
SESSION_COOKIE = "conveyor_session"
CSRF_COOKIE = "conveyor_csrf"  # the sign-in form's token, before there is a session
CSRF_FIELD = "csrf"
DEFAULT_SESSION_S = 8 * 3600  # a working day
# An access key id or secret is far shorter (AWS: 20 and 40 chars); a session cookie
# carries key ids up to this long.
MAX_FIELD_BYTES = MAX_KEY_ID_BYTES
MAX_FORM_BYTES = 16 * 1024  # every form but the send form (Console.FORM_BYTES)
MAX_FORM_FIELDS = 64  # a page of messages' selection boxes and a few more
FORM_TYPE = "application/x-www-form-urlencoded"

# What our cookies' values look like: a token (secrets.token_urlsafe) or a session cookie,
# whose own shape sessions.py checks.
_COOKIE_VALUE = re.compile(rf"[A-Za-z0-9_.-]{{16,{MAX_COOKIE_CHARS}}}")
# Where a sign-in may send the browser on: console pages only, in plain URL characters
# (no open redirect, nothing that could break the Location header).
# A console path, and its query (a search, a page number) in URL characters only.
_LOCAL_PATH = re.compile(r"/console(/[A-Za-z0-9._~%/-]*)?(\?[A-Za-z0-9._~%&=+-]*)?")


def new_token() -> str:
    return secrets.token_urlsafe(32)


def same_secret(given: str | None, expected: str | None) -> bool:
    """Constant-time comparison of two texts as UTF-8 bytes (any characters, never a
    TypeError as `hmac.compare_digest` raises for non-ASCII str)."""
    if not given or not expected:
        return False
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"),
                               expected.encode("utf-8", "surrogatepass"))


def check_secret(access_keys: dict[str, str], key_id: str, secret: str) -> bool:
    """True when `secret` is `key_id`'s; an unknown key id costs the same comparison."""
    expected = access_keys.get(key_id)
    matched = same_secret(secret, expected if expected is not None else new_token())
    return matched and expected is not None


def cookies(req: Request) -> dict[str, str]:
    """The request's cookies (the first of each name) whose values look like ours."""
    jar: dict[str, str] = {}
    for pair in req.headers.get("cookie", "").split(";"):
        name, _, value = pair.strip().partition("=")
        if name not in jar and _COOKIE_VALUE.fullmatch(value):
            jar[name] = value
    return jar


def set_cookie(req: Request, name: str, value: str, max_age_s: int) -> tuple[bytes, bytes]:
    """A `Set-Cookie` header for a console cookie; `max_age_s` 0 deletes it."""
    secure = "; Secure" if req.scheme == "https" else ""
    line = (f"{name}={value}; HttpOnly; SameSite=Strict; Path=/console; "
            f"Max-Age={max_age_s}{secure}")
    return b"set-cookie", line.encode("ascii")


def same_origin(req: Request) -> bool:
    """False when the request names an Origin (browsers do on every POST) other than the
    host it was sent to: another site's page posting here. Scheme is not compared, so a
    TLS-terminating proxy in front does not make every form cross-origin."""
    origin = req.headers.get("origin")
    if origin is None:
        return True
    host = req.headers.get("host", "")
    try:
        netloc = urlsplit(origin).netloc
    except ValueError:
        return False
    return bool(host) and netloc.lower() == host.lower()


def read_form(req: Request, max_bytes: int = MAX_FORM_BYTES) -> dict[str, str] | None:
    """The fields of a form-encoded body, or None when it is anything else: another type,
    too large, not ASCII, not UTF-8 once decoded, malformed, or a field given twice."""
    content_type = req.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != FORM_TYPE or req.body_too_large or len(req.body) > max_bytes:
        return None
    try:
        pairs = parse_qsl(req.body.decode("ascii"), keep_blank_values=True,
                          strict_parsing=bool(req.body), errors="strict",
                          max_num_fields=MAX_FORM_FIELDS)
    except ValueError:  # UnicodeDecodeError included
        return None
    form = dict(pairs)
    return form if len(form) == len(pairs) else None


class SignIn:
    """Sign-in and sign-out for a console with access keys (none: every page is open).

    The actions run behind Console._post's checks (origin, form, CSRF token). Failed
    sign-ins are counted per key id and per client address by `throttle`
    (service/signins.py); once either is over its limit a sign-in is answered 429 with
    `Retry-After`, its secret unchecked, so even the right one waits until the lock ends.
    The client address is the connection's peer: the server trusts no proxy's
    X-Forwarded-For, so behind a proxy every browser counts as the proxy's address (the
    key's count still holds). `count` hears each outcome ("ok", "failed", "throttled").
    """

    def __init__(self, access_keys: dict[str, str], now_ms: Callable[[], int],
                 lifetime_s: int = DEFAULT_SESSION_S, throttle: SignInThrottle | None = None,
                 count: Callable[[str], None] = lambda outcome: None) -> None:
        self.access_keys = access_keys
        self.lifetime_s = lifetime_s
        self.sessions = SessionCookies(access_keys, now_ms, lifetime_s)
        self.throttle = throttle
        self.count = count

    def session(self, req: Request) -> Session | None:
        """The request's live session, if its cookie proves one for a configured key."""
        return self.sessions.verify(cookies(req).get(SESSION_COOKIE))

    async def sign_in(self, req: Request, form: dict[str, str],
                      session: Session | None) -> Response:
        if not self.access_keys:
            return redirect(PREFIX)
        key_id = form.get("access_key_id", "")
        secret = form.get("secret_access_key", "")
        then = _local(form.get("next"))
        sizes = (len(key_id.encode()), len(secret.encode()))
        if not all(sizes) or max(sizes) > MAX_FIELD_BYTES:
            return self.page(req, 400, "Enter an access key id and its secret key (at most "
                             f"{MAX_FIELD_BYTES} bytes each).", then)
        throttle = self.throttle
        if throttle is not None and (wait_s := await throttle.locked_s(key_id, req.peer)):
            log.warning("console: sign-in throttled for access key %r from %s: locked for "
                        "%d s more", key_id, req.peer, wait_s)
            self.count("throttled")
            return self.throttled(req, wait_s, then, key_id)
        if not check_secret(self.access_keys, key_id, secret):
            wait_s = await throttle.failed(key_id, req.peer) if throttle is not None else 0
            log.warning("console: sign-in failed for access key %r from %s%s", key_id,
                        req.peer, f"; locked for {wait_s} s" if wait_s else "")
            self.count("failed")
            if wait_s:
                return self.throttled(req, wait_s, then, key_id)
            return self.page(req, 401, "Wrong access key id or secret key.", then, key_id)
        if throttle is not None:
            await throttle.succeeded(key_id)
        self.count("ok")
        if session is not None:  # signing in again ends the session it replaces
            self.sessions.sign_out(session)
        session = self.sessions.issue(key_id)
        log.info("console: access key %s signed in", key_id)
        return redirect(then, [set_cookie(req, SESSION_COOKIE, session.cookie,
                                          self.lifetime_s)])

    def throttled(self, req: Request, wait_s: int, then: str, key_id: str) -> Response:
        """429 Too Many Requests with Retry-After (RFC 6585 §4; RFC 9110 §10.2.3: seconds)."""
        response = self.page(req, 429, f"Too many failed sign-ins. Try again in {wait_s} "
                             "seconds.", then, key_id)
        response.headers.append((b"retry-after", str(wait_s).encode("ascii")))
        return response

    async def sign_out(self, req: Request, form: dict[str, str],
                       session: Session | None) -> Response:
        if session is not None:
            self.sessions.sign_out(session)
        return redirect(SIGN_IN if self.access_keys else PREFIX,
                        [set_cookie(req, SESSION_COOKIE, "", 0)])

    def page(self, req: Request, status: int = 200, problem: str = "",
             then: str | None = None, key_id: str = "") -> Response:
        """The sign-in form, whose CSRF token the CSRF cookie repeats (set here if the
        browser has none). A 401 names a scheme (RFC 9110 §15.5.2: it carries a challenge);
        browsers do not know it, so they show the form instead of a password prompt."""
        if not self.access_keys:
            return redirect(PREFIX)
        if then is None:
            then = _local(dict(parse_qsl(req.query_string.decode("latin-1"))).get("next"))
        if status == 200 and self.session(req) is not None:
            return redirect(then)
        token, headers = self.form_token(req, None)  # signing in is before any session
        if status == 401:
            headers.append((b"www-authenticate", b'Form realm="Conveyor console"'))
        shown_key = escape(key_id) if len(key_id) <= MAX_FIELD_BYTES else ""
        body = (f"<p><b>{escape(problem)}</b></p>" if problem else "") + (
            f'<form method="post" action="{SIGN_IN}">'
            f'<input type="hidden" name="{CSRF_FIELD}" value="{escape(token)}">'
            f'<input type="hidden" name="next" value="{escape(then)}">'
            '<label>Access key id<br><input name="access_key_id" autocomplete="username" '
            f'required value="{shown_key}"></label>'
            '<label>Secret key<br><input name="secret_access_key" type="password" '
            'autocomplete="current-password" required></label>'
            "<button>Sign in</button></form>"
            '<p class="muted">One of the access keys this server was started with.</p>')
        response = render(status, "Sign in", body)
        response.headers += headers
        return response

    def form_token(self, req: Request,
                   session: Session | None) -> tuple[str, list[tuple[bytes, bytes]]]:
        """The CSRF token that a form on a page must carry for Console._post to accept it,
        and the headers to send with that page: the session's token, or without one (the
        sign-in form, a console without keys) the CSRF cookie's, set here if it is new."""
        if session is not None:
            return session.csrf, []
        token = cookies(req).get(CSRF_COOKIE)
        if token is not None:
            return token, []
        token = new_token()
        return token, [set_cookie(req, CSRF_COOKIE, token, self.lifetime_s)]

    def to_sign_in(self, req: Request, then: str) -> Response:
        """Send a browser without a live session to the sign-in form (and on to `then`
        after), forgetting the session cookie it may still hold."""
        headers = []
        if SESSION_COOKIE in cookies(req):
            headers.append(set_cookie(req, SESSION_COOKIE, "", 0))
        then = _local(then)
        target = SIGN_IN if then == PREFIX else f"{SIGN_IN}?next={quote(then, safe='')}"
        return redirect(target, headers)

    @staticmethod
    def who(session: Session | None) -> str:
        """Who is signed in, and the sign-out button (with the session's CSRF token)."""
        if session is None:
            return ""
        return (f'<form class="who" method="post" action="{SIGN_OUT}">'
                f"Signed in as <code>{escape(session.key_id)}</code> "
                f'<input type="hidden" name="{CSRF_FIELD}" value="{escape(session.csrf)}">'
                "<button>Sign out</button></form>")


def _local(path: str | None) -> str:
    """`path` if it is a console page to go on to after signing in, else the overview."""
    return path if path and _LOCAL_PATH.fullmatch(path) else PREFIX
