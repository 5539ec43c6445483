"""Console sign-in: sessions for access keys, cookie flags, CSRF tokens and Origin checks.

Browser-free: a cookie-keeping HTTP client (helpers.Browser) against a real server. What
the cookies must look like follows RFC 6265bis (draft-ietf-httpbis-rfc6265bis): HttpOnly,
SameSite=Strict ("The SameSite Attribute"), Path and Max-Age, and no Secure over plain
http. SameSite is only defence in depth there, so forged posts are refused by the CSRF
token and the Origin check, which these tests exercise without SameSite's help.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
from http.cookies import Morsel, SimpleCookie
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from conveyor.server.console import auth, sessions
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


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _forge(key_id: str, secret: str, expires_ms: int, nonce: str = "n" * 43,
           key_id_b64: str | None = None) -> str:
    """A session cookie made by the recipe sessions.py documents, without its code:
    `v1.<key id>.<expiry ms>.<nonce>.<mac>`, base64url without padding (RFC 4648 §5), the
    MAC HMAC-SHA256 (RFC 2104) of "session\0" and the rest, keyed by HMAC-SHA256(secret,
    "conveyor console session v1")."""
    signed = f"v1.{key_id_b64 or _b64(key_id.encode())}.{expires_ms}.{nonce}"
    return f"{signed}.{_b64(_hmac(secret, b'session' + bytes(1) + signed.encode()))}"


def _hmac(secret: str, message: bytes) -> bytes:
    key = hmac.new(secret.encode(), b"conveyor console session v1", hashlib.sha256).digest()
    return hmac.new(key, message, hashlib.sha256).digest()


def _server_now_ms(server: ServerProcess) -> int:
    """The (moved) server clock's time: a fresh session's expiry less its lifetime."""
    browser = Browser(server.url)
    assert browser.sign_in(KEY, SECRET).status == 303
    return int(browser.cookies["conveyor_session"].split(".")[2]) - SESSION_HOURS * 3_600_000


def _signed_out(server: ServerProcess, cookie: str) -> bool:
    """True when `cookie` gets a page no further than the sign-in form, and no action."""
    browser = Browser(server.url, {"conveyor_session": cookie})
    page = browser.get("/console")
    if page.status == 200:
        return False
    assert page.status == 303 and page.header("location") == "/console/sign-in", page.status
    # nor does it carry any form that an action would take
    token = Browser(server.url).get("/console/sign-in").form_token()
    refused = browser.post("/console/sign-out", {"csrf": token},
                           {"Cookie": f"conveyor_session={cookie}; conveyor_csrf={token}"})
    assert refused.status == 403
    return True


def test_a_cookie_made_by_the_documented_recipe_is_a_session(signing: ServerProcess) -> None:
    """The cookie's format and the CSRF token's derivation (HMAC-SHA256 of "csrf\0" and the
    nonce under the session key: OWASP's signed double-submit token) as documented."""
    nonce = _b64(b"n" * 32)
    cookie = _forge(KEY, SECRET, _server_now_ms(signing) + 3_600_000, nonce)
    page = Browser(signing.url, {"conveyor_session": cookie}).get("/console")
    assert page.status == 200
    assert f"Signed in as <code>{KEY}</code>" in page.text
    assert page.form_token() == _b64(_hmac(SECRET, b"csrf" + bytes(1) + nonce.encode()))


def _tampered(cookie: str, field: int, value: str) -> str:
    fields = cookie.split(".")
    fields[field] = value
    return ".".join(fields)


def _flip(text: str, at: int = 0, bit: int = 1) -> str:
    """`text` with one base64url character changed (its 6-bit value xor `bit`)."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    at %= len(text)
    return text[:at] + alphabet[alphabet.index(text[at]) ^ bit] + text[at + 1:]


def test_a_tampered_session_cookie_is_signed_out(signing: ServerProcess,
                                                 signed_in: Browser) -> None:
    """Each field of a real cookie changed (the MAC, RFC 2104, covers all of them), and
    cookies of the wrong shape: no session, never a 500."""
    real = signed_in.cookies["conveyor_session"]
    version, key_id, expires, nonce, mac = real.split(".")
    assert not _signed_out(signing, real)
    tampered = {
        "version": _tampered(real, 0, "v2"),
        "key id": _tampered(real, 1, _b64(WIDE_KEY.encode())),  # another configured key
        "expiry": _tampered(real, 2, str(int(expires) - 1)),
        "nonce": _tampered(real, 3, _flip(nonce)),
        "mac": _tampered(real, 4, _flip(mac)),
        "mac's spare bits": _tampered(real, 4, _flip(mac, -1)),  # decodes to the same bytes
        "no mac": real.rpartition(".")[0],
        "a sixth field": real + ".AAAA",
        "empty": "",
        "huge expiry": _tampered(real, 2, "9" * 40),
        "huge key id": _tampered(real, 1, "A" * 5000),
        "not base64": _tampered(real, 1, "AK!D"),
    }
    for what, cookie in tampered.items():
        assert _signed_out(signing, cookie), what
    assert not _signed_out(signing, real)
    assert "Traceback" not in signing.log()


def test_well_signed_cookies_of_the_wrong_kind_are_signed_out(signing: ServerProcess) -> None:
    """Correct MACs over what no server issues: an unknown key, a key id in non-canonical
    or invalid base64url or not UTF-8, a leading zero in the expiry."""
    ends = _server_now_ms(signing) + 3_600_000
    canonical = _b64(KEY.encode())
    assert not _signed_out(signing, _forge(KEY, SECRET, ends, key_id_b64=canonical))
    for what, cookie in {
        "unknown key": _forge("AKIDNOBODY", SECRET, ends),
        "non-canonical key id": _forge(KEY, SECRET, ends, key_id_b64=_flip(canonical, -1)),
        "base64 of bad length": _forge(KEY, SECRET, ends, key_id_b64="A"),
        "not UTF-8": _forge(KEY, SECRET, ends, key_id_b64=_b64(b"\xff\xfe")),
        "leading zero": _forge(KEY, SECRET, ends).replace(f".{ends}.", f".0{ends}."),
    }.items():
        assert _signed_out(signing, cookie), what
    assert "Traceback" not in signing.log()


def test_expired_and_far_future_cookies_are_signed_out(signing: ServerProcess) -> None:
    """A correctly signed cookie is a session only between now and as far ahead as a session
    made now could last, give or take MAX_CLOCK_SKEW_S."""
    now = _server_now_ms(signing)
    latest = now + (SESSION_HOURS * 3600 + sessions.MAX_CLOCK_SKEW_S) * 1000
    assert _signed_out(signing, _forge(KEY, SECRET, now - 1_000))
    assert _signed_out(signing, _forge(KEY, SECRET, latest + 60_000))
    assert not _signed_out(signing, _forge(KEY, SECRET, latest - 60_000))
    assert not _signed_out(signing, _forge(KEY, SECRET, now + 60_000))


def test_a_csrf_token_of_another_session_is_refused(signing: ServerProcess,
                                                    signed_in: Browser) -> None:
    """OWASP's signed double-submit token is bound to its session: another sign-in's, of
    the same key or another, does not pass."""
    same_key, other_key = Browser(signing.url), Browser(signing.url)
    assert same_key.sign_in(KEY, SECRET).status == 303
    assert other_key.sign_in(WIDE_KEY, WIDE_SECRET).status == 303
    own = signed_in.get("/console").form_token()
    for other in (same_key, other_key):
        token = other.get("/console").form_token()
        assert token != own
        assert signed_in.post("/console/sign-out", {"csrf": token}).status == 403
        assert signed_in.get("/console").status == 200
    assert signed_in.post("/console/sign-out", {"csrf": own}).status == 303


def test_sessions_outlive_a_restart_and_end_with_their_key(tmp_path: Path) -> None:
    """A restarted SQLite server with the same keys knows its sessions (and their CSRF
    tokens); restarted with the key's secret changed, or without the key, it does not."""
    keys = ["--access-key", f"{KEY}:{SECRET}", "--access-key", f"{WIDE_KEY}:{WIDE_SECRET}"]
    server = ServerProcess(tmp_path, "--mode", "relaxed", *keys).start()
    try:
        rotated, removed = Browser(server.url), Browser(server.url)
        assert rotated.sign_in(KEY, SECRET).status == 303
        assert removed.sign_in(WIDE_KEY, WIDE_SECRET).status == 303
        token = rotated.get("/console").form_token()
        server.restart()
        assert removed.get("/console").status == 200
        created = rotated.post("/console/create-queue", {"csrf": token, "name": "restarted",
                                                         "region": "us-east-1"})
        assert created.status == 303, created.text[:300]
        assert rotated.get("/console/queues/us-east-1/restarted").status == 200

        server.args = ["--mode", "relaxed", "--access-key", f"{KEY}:{SECRET}-rotated"]
        server.restart()
        assert rotated.get("/console").status == 303
        assert removed.get("/console").status == 303
    finally:
        server.stop()


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


def test_session_cookies_expire_on_the_clock_and_sign_outs_are_bounded(
        monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1_800_000_000_000]
    cookies = sessions.SessionCookies({"A": "a-secret"}, lambda: now[0], lifetime_s=60)
    first = cookies.issue("A")
    assert cookies.verify(first.cookie) == first
    assert first.csrf not in first.cookie
    now[0] += 59_999
    assert cookies.verify(first.cookie) == first
    now[0] += 1
    assert cookies.verify(first.cookie) is None
    assert cookies.verify("") is None and cookies.verify(None) is None

    monkeypatch.setattr(sessions, "MAX_SIGNED_OUT", 3)
    made = [cookies.issue("A") for _ in range(4)]  # one more sign-out than remembered
    for session in made:
        cookies.sign_out(session)
    assert cookies.verify(made[0].cookie) == made[0]  # the oldest sign-out was forgotten
    assert all(cookies.verify(s.cookie) is None for s in made[1:])
    now[0] += 60_000
    cookies.sign_out(cookies.issue("A"))  # expired sign-outs are pruned first
    assert len(cookies._signed_out) == 1


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
