"""AWS Signature Version 4: read the caller's region and key, verify the signature."""

from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime
from functools import lru_cache
from typing import NamedTuple
from urllib.parse import parse_qsl, quote

from conveyor.sqs.errors import (
    InvalidClientTokenId,
    MissingAuthenticationToken,
    SignatureDoesNotMatch,
)

ALGORITHM = "AWS4-HMAC-SHA256"
MAX_SKEW_S = 15 * 60  # SQS refuses requests signed more than 15 minutes away


class Credential(NamedTuple):
    access_key: str
    date: str
    region: str
    service: str
    signed_headers: tuple[str, ...]
    signature: str


def parse_authorization(header: str) -> Credential | None:
    """Parse `AWS4-HMAC-SHA256 Credential=AK/date/region/sqs/aws4_request, ...`."""
    # A client sends the same header every time but for the signature at its end, so the
    # rest is parsed once per client and day.
    rest, sep, signature = header.rpartition(", Signature=")
    if not (sep and signature.isalnum()):  # the signature is not last: parse it all
        rest, signature = header, _fields(header).get("Signature", "")
    scope = _scope(rest)
    if scope is None or not signature:
        return None
    return Credential(*scope, signature)


@lru_cache(maxsize=1024)
def _scope(header: str) -> tuple[str, str, str, str, tuple[str, ...]] | None:
    """Key, date, region, service and signed headers: all but the signature."""
    if not header.startswith(ALGORITHM + " "):
        return None
    fields = _fields(header)
    scope = fields.get("Credential", "").split("/")
    if len(scope) != 5 or not fields.get("SignedHeaders"):
        return None
    return scope[0], scope[1], scope[2], scope[3], tuple(fields["SignedHeaders"].split(";"))


def _fields(header: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for part in header[len(ALGORITHM) + 1:].split(","):
        key, _, value = part.strip().partition("=")
        fields[key] = value
    return fields


def verify(credential: Credential | None, secrets: dict[str, str], method: str, path: str,
           query: str, headers: dict[str, str], body: bytes, now: datetime | None = None) -> None:
    """Raise the SQS error for a missing, unknown or wrong signature."""
    if credential is None:
        raise MissingAuthenticationToken()
    secret = secrets.get(credential.access_key)
    if secret is None:
        raise InvalidClientTokenId()
    amz_date = headers.get("x-amz-date", "")
    try:
        signed_at = datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        raise SignatureDoesNotMatch("The request must carry a valid X-Amz-Date header.") from None
    if abs(((now or datetime.now(UTC)) - signed_at).total_seconds()) > MAX_SKEW_S:
        raise SignatureDoesNotMatch("Signature expired: the request time is too far from the "
                                    "server time.")
    expected = signature(secret, credential, method, path, query, headers, body, amz_date)
    if not hmac.compare_digest(expected, credential.signature):
        raise SignatureDoesNotMatch()


def signature(secret: str, credential: Credential, method: str, path: str, query: str,
              headers: dict[str, str], body: bytes, amz_date: str) -> str:
    canonical = "\n".join([
        method,
        quote(path or "/", safe="/~"),
        _canonical_query(query),
        "".join(f"{name}:{' '.join(headers.get(name, '').split())}\n"
                for name in credential.signed_headers),
        ";".join(credential.signed_headers),
        headers.get("x-amz-content-sha256") or hashlib.sha256(body).hexdigest(),
    ])
    scope = f"{credential.date}/{credential.region}/{credential.service}/aws4_request"
    to_sign = "\n".join([ALGORITHM, amz_date, scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    key = ("AWS4" + secret).encode()
    for part in (credential.date, credential.region, credential.service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


def _canonical_query(query: str) -> str:
    pairs = parse_qsl(query, keep_blank_values=True)
    return "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(pairs))
