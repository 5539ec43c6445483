"""Optional request signing, so the job endpoint cannot be spoofed from outside.

Header: `X-Conveyor-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>` where the MAC is over
`b"<t>." + body` with the shared secret (the same shape as Stripe's webhook signatures).
"""

from __future__ import annotations

import hashlib
import hmac

from conveyor.clock import Clock

SIGNATURE_HEADER = "X-Conveyor-Signature"


def sign(secret: str, body: bytes, timestamp_s: int) -> str:
    """The header value for `body`, signed at `timestamp_s` (unix seconds)."""
    mac = hmac.new(secret.encode(), f"{timestamp_s}.".encode() + body,
                   hashlib.sha256).hexdigest()
    return f"t={timestamp_s},v1={mac}"


def verify(secret: str, header: str, body: bytes, tolerance_s: int = 300,
           now_s: float | None = None) -> bool:
    """True if `header` signs `body` with `secret` within `tolerance_s` of now (for apps)."""
    fields = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    try:
        stamp = int(fields["t"])
    except (KeyError, ValueError):
        return False
    now = Clock().now_ms() / 1000 if now_s is None else now_s
    if abs(now - stamp) > tolerance_s:
        return False
    expected = sign(secret, body, stamp).split("v1=", 1)[1]
    return hmac.compare_digest(expected, fields.get("v1", ""))
