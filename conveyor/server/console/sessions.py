"""Console sessions that carry their own proof, so every node with the same keys knows them.

A session cookie's value is `v1.<key id>.<expiry>.<nonce>.<mac>`:

- the key id of the access key that signed in, base64url without padding (RFC 4648 §5);
- when the session ends, in milliseconds since the epoch on the server's clock (on
  PostgreSQL every node keeps the database's time, conveyor/clock.py);
- a random nonce (32 bytes, base64url) that names this sign-in;
- HMAC-SHA256 (RFC 2104) of "session\\0" and everything before it, base64url, keyed by
  that access key's *session key*: HMAC-SHA256(secret, "conveyor console session v1"), so
  the secret itself keys only SigV4 and nothing learnt about one use helps the other.

Any node configured with the same access key recomputes the MAC and accepts the cookie;
nothing is stored, so sessions hold on every node of a cluster and across restarts.
Changing or removing a key's secret ends its sessions at once, on every node that has the
new configuration. The CSRF token that a session's forms carry is HMAC-SHA256 of "csrf\\0"
and its nonce under the same session key (the label keeps it from being a cookie's MAC):
OWASP's CSRF Prevention Cheat Sheet, "Signed Double-Submit Cookie", a token bound to the
session by an HMAC instead of held in server state. Compared in constant time.

Parsing is strict: one fixed shape of bounded length, canonical base64url, an expiry in the
past or further ahead than a session lasts here (plus MAX_CLOCK_SKEW_S: give every node the
same `--console-session-hours`), an unknown key or a wrong MAC: each is no session, and the
browser is sent to sign in again.

Sign-out clears the browser's cookie and remembers the nonce as signed out until the
cookie would have expired (OWASP's Session Management Cheat Sheet, "Manual Session
Expiration": the server must end the session too, not only the browser). That memory is
this node's only (at most MAX_SIGNED_OUT nonces): a copy of the cookie presented to
another node, or to this one after a restart, stays valid until its expiry (`Max-Age`,
`--console-session-hours`). Changing the key's secret ends every session of it at once.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass

VERSION = "v1"
_KEY_LABEL = b"conveyor console session v1"  # derives the session key from a key's secret
_MAC_LABEL = b"session\0"  # what the session key signs: a cookie, or (below) a CSRF token
_CSRF_LABEL = b"csrf\0"
NONCE_BYTES = 32  # as OWASP asks of session ids: at least 64 bits of entropy; 256 here
MAX_KEY_ID_BYTES = 1024  # auth.MAX_FIELD_BYTES: the sign-in form takes no longer key id
MAX_CLOCK_SKEW_S = 300  # a cookie may end this much later than a session made now would
MAX_SIGNED_OUT = 10_000  # signed-out nonces remembered; only key holders can add them

_B64 = r"[A-Za-z0-9_-]"
_DIGEST = f"{_B64}{{43}}"  # 32 bytes, base64url without padding
# One shape, bounded: key id (base64url of at most MAX_KEY_ID_BYTES), expiry (no leading
# zero, at most 16 digits), nonce, MAC.
_COOKIE = re.compile(rf"{VERSION}\.({_B64}{{1,{-(-MAX_KEY_ID_BYTES * 4 // 3)}}})"
                     rf"\.([1-9][0-9]{{0,15}})\.({_DIGEST})\.({_DIGEST})")
MAX_COOKIE_CHARS = 2048  # above the longest cookie _COOKIE matches (about 1,500)


@dataclass(frozen=True, slots=True)
class Session:
    key_id: str  # the access key that signed in
    nonce: str  # names this sign-in
    expires_ms: int
    csrf: str  # forms of this session carry it; see Console._post
    cookie: str  # the session cookie's value


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes | None:
    """The bytes of canonical unpadded base64url `text`, else None (a text that decodes
    but is not what encoding those bytes gives, such as stray low bits, is refused)."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return None
    return raw if _b64(raw) == text else None


def _key_id(text: str) -> str | None:
    """The key id a cookie names, or None when that is not canonical base64url of UTF-8."""
    raw = _unb64(text)
    try:
        return raw.decode("utf-8", "surrogatepass") if raw is not None else None
    except UnicodeDecodeError:
        return None


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # any configured text, never an error


def session_key(secret: str) -> bytes:
    """The key that signs a key's sessions and CSRF tokens, derived from its secret."""
    return hmac.new(_utf8(secret), _KEY_LABEL, hashlib.sha256).digest()


def _mac(key: bytes, label: bytes, text: str) -> str:
    return _b64(hmac.new(key, label + text.encode("ascii"), hashlib.sha256).digest())


class SessionCookies:
    """Issues and checks session cookies for the configured access keys (see the module
    docstring), and remembers this node's sign-outs. Times come from `now_ms`, the
    server's clock (tests move it)."""

    def __init__(self, access_keys: dict[str, str], now_ms: Callable[[], int],
                 lifetime_s: int) -> None:
        self.now_ms = now_ms
        self.lifetime_s = lifetime_s
        self._keys = {key_id: session_key(secret) for key_id, secret in access_keys.items()}
        self._signed_out: dict[str, int] = {}  # nonce -> its expiry, in sign-out order

    def issue(self, key_id: str) -> Session:
        """A new session for `key_id`, which must be a configured key."""
        key = self._keys[key_id]
        expires_ms = self.now_ms() + self.lifetime_s * 1000
        nonce = _b64(secrets.token_bytes(NONCE_BYTES))
        signed = f"{VERSION}.{_b64(_utf8(key_id))}.{expires_ms}.{nonce}"
        return self._session(key_id, key, signed, _mac(key, _MAC_LABEL, signed))

    def verify(self, cookie: str | None) -> Session | None:
        """The live session that `cookie` proves, or None for anything else."""
        found = _COOKIE.fullmatch(cookie) if cookie else None
        if found is None:
            return None
        key_id = _key_id(found[1])
        key = self._keys.get(key_id) if key_id is not None else None
        if key_id is None or key is None:
            return None
        signed, _, mac = found[0].rpartition(".")
        if not hmac.compare_digest(_mac(key, _MAC_LABEL, signed), mac):
            return None
        now, expires_ms = self.now_ms(), int(found[2])
        latest_ms = now + (self.lifetime_s + MAX_CLOCK_SKEW_S) * 1000
        if not now < expires_ms <= latest_ms or found[3] in self._signed_out:
            return None
        return self._session(key_id, key, signed, mac)

    def sign_out(self, session: Session) -> None:
        """Refuse `session`'s cookie on this node from now until it expires."""
        now = self.now_ms()
        for nonce in [n for n, ends in self._signed_out.items() if ends <= now]:
            del self._signed_out[nonce]
        while len(self._signed_out) >= MAX_SIGNED_OUT:  # the oldest sign-out goes first
            del self._signed_out[next(iter(self._signed_out))]
        self._signed_out[session.nonce] = session.expires_ms

    @staticmethod
    def _session(key_id: str, key: bytes, signed: str, mac: str) -> Session:
        _, _, expires, nonce = signed.split(".")
        return Session(key_id, nonce, int(expires), _mac(key, _CSRF_LABEL, nonce),
                       f"{signed}.{mac}")
