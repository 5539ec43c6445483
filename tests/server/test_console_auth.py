"""Console sign-in: sessions for access keys, cookie flags, CSRF tokens and Origin checks.

Browser-free: a cookie-keeping HTTP client (helpers.Browser) against a real server. What
the cookies must look like follows RFC 6265bis (draft-ietf-httpbis-rfc6265bis): HttpOnly,
SameSite=Strict ("The SameSite Attribute"), Path and Max-Age, and no Secure over plain
http. SameSite is only defence in depth there, so forged posts are refused by the CSRF
token and the Origin check, which these tests exercise without SameSite's help.
"""

from __future__ import annotations

import http.client
from http.cookies import Morsel, SimpleCookie
from urllib.parse import urlsplit

import pytest

from conveyor.server.console import auth
from conveyor.server.http import Request
from tests.server.conftest import Launcher
from tests.server.helpers import Browser, RawClient, advance_clock, unique
from tests.support import ServerProcess

KEY, SECRET = "AKIDCONSOLE", "console/s3cret+key"
WIDE_KEY, WIDE_SECRET = "AKIDWIDE", "sécret-ü-🔑"  # a secret beyond ASCII
SESSION_HOURS = 2


@pytest.fixture(scope="module")
def signing(launch: Launcher) -> ServerProcess:
    """A signing server whose console sessions last SESSION_HOURS and whose clock moves."""
    return launch("--mode", "relaxed", "--dev-clock", "--access-key", f"{KEY}:{SECRET}",
                  "--access-key", f"{WIDE_KEY}:{WIDE_SECRET}",
                  "--console-session-hours", str(SESSION_HOURS))


@pytest.fixture
def browser(signing: ServerProcess) -> Browser:
    return Browser(signing.url)


@pytest.fixture
def signed_in(browser: Browser) -> Browser:
    assert browser.sign_in(KEY, SECRET).status == 303
    return browser


def _assert_console_cookie_flags(morsel: Morsel, max_age: str) -> None:
    assert morsel["httponly"] is True
    assert morsel["samesite"] == "Strict"
    assert morsel["path"] == "/console"
    assert morsel["max-age"] == max_age


def _assert_console_cookie(morsel: Morsel, max_age: str) -> None:
    _assert_console_cookie_flags(morsel, max_age)
    assert morsel["secure"] == ""  # plain http: no Secure


def test_pages_send_a_browser_without_a_session_to_sign_in(browser: Browser) -> None:
    home = browser.get("/console")
    assert home.status == 303
    assert home.header("location") == "/console/sign-in"
    queue = browser.get("/console/queues/us-east-1/jobs")
    assert queue.status == 303
    assert queue.header("location") == (
        "/console/sign-in?next=%2Fconsole%2Fqueues%2Fus-east-1%2Fjobs")
    form = browser.get(queue.header("location") or "")
    assert form.status == 200
    assert 'name="next" value="/console/queues/us-east-1/jobs"' in form.text
    assert 'type="password"' in form.text


def test_sign_in_sets_a_strict_http_only_session_cookie(browser: Browser) -> None:
    form = browser.get("/console/sign-in")
    _assert_console_cookie(form.set_cookies()["conveyor_csrf"], str(SESSION_HOURS * 3600))
    assert form.form_token() == browser.cookies["conveyor_csrf"]  # double submit

    signed = browser.post("/console/sign-in", {
        "csrf": form.form_token(), "access_key_id": KEY, "secret_access_key": SECRET,
        "next": "/console/queues/us-east-1/jobs"})
    assert signed.status == 303
    assert signed.header("location") == "/console/queues/us-east-1/jobs"
    session = signed.set_cookies()["conveyor_session"]
    _assert_console_cookie(session, str(SESSION_HOURS * 3600))
    assert len(session.value) >= 43  # secrets.token_urlsafe(32)
    home = browser.get("/console")
    assert home.status == 200
    assert f"Signed in as <code>{KEY}</code>" in home.text
    assert home.header("cache-control") == "no-store"


def test_a_signed_in_session_sees_queue_pages(signing: ServerProcess,
                                              signed_in: Browser) -> None:
    name = unique("con-auth")
    sqs = RawClient(signing.url, access_key=KEY, secret_key=SECRET)
    assert sqs.json_call("CreateQueue", {"QueueName": name}).status == 200
    sent = sqs.json_call("SendMessage", {"QueueUrl": name, "MessageBody": "peek <me>"})
    assert sent.status == 200
    overview = signed_in.get("/console")
    assert f'href="/console/queues/us-east-1/{name}"' in overview.text
    page = signed_in.get(f"/console/queues/us-east-1/{name}")
    assert page.status == 200
    assert "peek &lt;me&gt;" in page.text


def test_a_secret_beyond_ascii_signs_in(browser: Browser) -> None:
    assert browser.sign_in(WIDE_KEY, "sécret-ü-🗝").status == 401
    assert browser.sign_in(WIDE_KEY, WIDE_SECRET).status == 303
    assert f"Signed in as <code>{WIDE_KEY}</code>" in browser.get("/console").text


@pytest.mark.parametrize(("key", "secret"), [
    (KEY, "wrong"), (KEY, SECRET + "x"), (KEY, SECRET[:-1]), ("AKIDOTHER", SECRET),
    (WIDE_KEY, SECRET), (KEY, WIDE_SECRET), (KEY.lower(), SECRET),
])
def test_a_wrong_key_or_secret_is_401_and_sets_no_session(browser: Browser, key: str,
                                                          secret: str) -> None:
    refused = browser.sign_in(key, secret)
    assert refused.status == 401
    assert "conveyor_session" not in refused.set_cookies()
    assert "Wrong access key id or secret key." in refused.text
    assert browser.get("/console").status == 303


def test_a_forged_sign_in_is_refused(browser: Browser) -> None:
    token = browser.get("/console/sign-in").form_token()
    fields = {"access_key_id": KEY, "secret_access_key": SECRET}
    forgeries = [
        (fields, {}),  # no token in the form
        ({**fields, "csrf": "x" * 43}, {}),  # a wrong one
        ({**fields, "csrf": token}, {"Cookie": ""}),  # the form's, but no cookie to match
        ({**fields, "csrf": token}, {"Cookie": "conveyor_csrf=" + "y" * 43}),  # another's
    ]
    for form, headers in forgeries:
        refused = browser.post("/console/sign-in", form, headers)
        assert refused.status == 403, (form, headers)
        assert "conveyor_session" not in refused.set_cookies()
    assert browser.get("/console").status == 303
    assert browser.post("/console/sign-in", {**fields, "csrf": token}).status == 303


def test_a_forged_sign_out_is_refused_and_the_session_lives_on(signed_in: Browser) -> None:
    token = signed_in.get("/console").form_token()
    for form in ({}, {"csrf": ""}, {"csrf": token[:-1]}, {"csrf": "z" * len(token)},
                 # the pre-session CSRF cookie's token is not the session's
                 {"csrf": signed_in.cookies["conveyor_csrf"]}):
        refused = signed_in.post("/console/sign-out", form)
        assert refused.status == 403, form
        assert "set-cookie" not in {k.lower() for k, _ in refused.headers}
        assert signed_in.get("/console").status == 200

    out = signed_in.post("/console/sign-out", {"csrf": token})
    assert out.status == 303
    assert out.header("location") == "/console/sign-in"
    assert out.set_cookies()["conveyor_session"]["max-age"] == "0"
    assert "conveyor_session" not in signed_in.cookies
    assert signed_in.get("/console").status == 303


def test_a_signed_out_session_token_is_dead(signed_in: Browser) -> None:
    stolen = signed_in.cookies["conveyor_session"]
    signed_in.post("/console/sign-out", {"csrf": signed_in.get("/console").form_token()})
    replay = signed_in.request("GET", "/console",
                               headers={"Cookie": f"conveyor_session={stolen}"})
    assert replay.status == 303


def test_a_post_without_a_live_session_is_refused(signed_in: Browser) -> None:
    token = signed_in.get("/console").form_token()
    refused = signed_in.post("/console/sign-out", {"csrf": token}, {"Cookie": ""})
    assert refused.status == 403
    assert signed_in.get("/console").status == 200


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "http://127.0.0.1:1",
                                    "http://127.0.0.1.evil.example"])
def test_a_cross_origin_post_is_refused(signing: ServerProcess, signed_in: Browser,
                                        origin: str) -> None:
    token = signed_in.get("/console").form_token()
    refused = signed_in.post("/console/sign-out", {"csrf": token}, {"Origin": origin})
    assert refused.status == 403
    assert signed_in.get("/console").status == 200

    stranger = Browser(signing.url)
    fields = {"csrf": stranger.get("/console/sign-in").form_token(), "access_key_id": KEY,
              "secret_access_key": SECRET}
    refused = stranger.post("/console/sign-in", fields, {"Origin": origin})
    assert refused.status == 403
    assert "conveyor_session" not in refused.set_cookies()
    assert stranger.post("/console/sign-in", fields).status == 303  # from its own page


def test_an_expired_session_goes_back_to_sign_in(signing: ServerProcess,
                                                 signed_in: Browser) -> None:
    advance_clock(signing.url, SESSION_HOURS * 3600 - 60)
    assert signed_in.get("/console").status == 200
    advance_clock(signing.url, 61)
    expired = signed_in.get("/console/queues/us-east-1/jobs")
    assert expired.status == 303
    assert (expired.header("location") or "").startswith("/console/sign-in?next=")
    assert expired.set_cookies()["conveyor_session"]["max-age"] == "0"
    assert signed_in.sign_in(KEY, SECRET).status == 303
    assert signed_in.get("/console").status == 200


def _raw_post(server: ServerProcess, path: str, body: bytes, headers: dict[str, str]) -> int:
    """POST bytes as they are (no client-side encoding); the status."""
    parts = urlsplit(server.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.request("POST", path, body=body, headers=headers)
        resp = conn.getresponse()
        resp.read()
        return resp.status
    finally:
        conn.close()


BAD_SIGN_INS = [
    "access_key_id=%C3%A9%C3%A9&secret_access_key=%C3%A9",  # non-ASCII key and secret
    f"access_key_id={KEY}&secret_access_key=%F0%9F%94%91",
    f"access_key_id=%E2%80%AE{KEY}&secret_access_key=x",
    "access_key_id=%FF&secret_access_key=%FE",  # not UTF-8
    f"access_key_id={KEY}&secret_access_key=%00",
    f"access_key_id={KEY}&secret_access_key=",  # empty
    "access_key_id=&secret_access_key=x",
    f"access_key_id={KEY}",  # missing
    "access_key_id=" + "A" * 2000 + "&secret_access_key=x",  # absurdly long
    f"access_key_id={KEY}&secret_access_key=" + "s" * 2000,
    f"access_key_id={KEY}&access_key_id={KEY}&secret_access_key={SECRET}",  # twice
    "%%%=&&",  # malformed
    "no-equals-sign",
    "&".join(f"f{i}=1" for i in range(100)),  # too many fields
    "x=" + "y" * 20_000,  # too large
]


@pytest.mark.parametrize("fields", BAD_SIGN_INS)
def test_bad_sign_in_forms_are_4xx_never_5xx(signing: ServerProcess, browser: Browser,
                                             fields: str) -> None:
    token = browser.get("/console/sign-in").form_token()
    headers = {"Content-Type": "application/x-www-form-urlencoded",
               "Cookie": f"conveyor_csrf={token}"}
    status = _raw_post(signing, "/console/sign-in", f"csrf={token}&{fields}".encode(), headers)
    assert 400 <= status < 500, (fields, status)
    assert "Traceback" not in signing.log()


@pytest.mark.parametrize(("body", "content_type"), [
    ("csrf=é&access_key_id=é&secret_access_key=é".encode(), "application/x-www-form-urlencoded"),
    (b"\xff\xfe\x00garbage", "application/x-www-form-urlencoded"),
    (b'{"access_key_id": "x"}', "application/json"),
    (b"", "application/x-www-form-urlencoded"),
    (b"csrf=x", "multipart/form-data; boundary=x"),
    (b"csrf=x", ""),
])
def test_garbage_posts_are_4xx_never_5xx(signing: ServerProcess, body: bytes,
                                         content_type: str) -> None:
    for path in ("/console/sign-in", "/console/sign-out", "/console", "/console/nowhere"):
        headers = {"Content-Type": content_type, "Cookie": "conveyor_csrf=é; =; ;;"}
        status = _raw_post(signing, path, body, headers)
        assert 400 <= status < 500, (path, body, status)
    assert "Traceback" not in signing.log()


def test_open_metrics_on_a_signing_server_is_warned_about(signing: ServerProcess) -> None:
    assert "/metrics is open to anyone" in signing.log()


# --- the pieces, without a server --------------------------------------------------------


def _request(scheme: str = "http", **headers: str) -> Request:
    return Request("POST", "/console/sign-in", b"", headers, b"",
                   None, scheme=scheme)  # type: ignore[arg-type]  # no connection


def test_cookies_are_secure_over_https() -> None:
    name, value = auth.set_cookie(_request("https"), "conveyor_session", "t" * 43, 60)
    assert name == b"set-cookie"
    morsel = SimpleCookie(value.decode())["conveyor_session"]
    _assert_console_cookie_flags(morsel, "60")
    assert morsel["secure"] is True
    plain = auth.set_cookie(_request("http"), "conveyor_session", "t" * 43, 60)[1]
    assert b"Secure" not in plain


def test_sessions_expire_on_the_clock_and_are_bounded() -> None:
    now = [0]
    sessions = auth.Sessions(lambda: now[0], lifetime_s=60, limit=3)
    first = sessions.create("A")
    assert sessions.find(first.token) is first
    assert first.csrf != first.token
    now[0] = 59_999
    assert sessions.find(first.token) is first
    now[0] = 60_000
    assert sessions.find(first.token) is None
    made = [sessions.create(k) for k in "BCDE"]  # one more than the limit
    assert sessions.find(made[0].token) is None  # the oldest went first
    assert all(sessions.find(s.token) is s for s in made[1:])
    assert sessions.find("") is None and sessions.find(None) is None


def test_secrets_compare_as_bytes_whatever_their_characters() -> None:
    assert auth.same_secret("sécret-🔑", "sécret-🔑")
    assert not auth.same_secret("sécret", "secret")
    assert not auth.same_secret("", "") and not auth.same_secret(None, "x")
    assert auth.check_secret({"K": "é"}, "K", "é")
    assert not auth.check_secret({"K": "é"}, "other", "é")


@pytest.mark.parametrize(("origin", "host", "same"), [
    (None, "127.0.0.1:9324", True),  # not a browser's cross-site form (they send Origin)
    ("http://127.0.0.1:9324", "127.0.0.1:9324", True),
    ("https://Console.Example", "console.example", True),  # behind a TLS proxy
    ("http://127.0.0.1:9325", "127.0.0.1:9324", False),
    ("null", "127.0.0.1:9324", False),
    ("http://evil.example", "127.0.0.1:9324", False),
    ("http://[::1", "127.0.0.1:9324", False),  # not even a URL
    ("http://127.0.0.1:9324", "", False),
])
def test_same_origin(origin: str | None, host: str, same: bool) -> None:
    headers = {"host": host} | ({"origin": origin} if origin is not None else {})
    assert auth.same_origin(_request(**headers)) is same
