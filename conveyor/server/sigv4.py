"""AWS Signature Version 4, verified the way AWS verifies it.

A request proves who sent it in one of two places: the `Authorization` header, or the
query string of a presigned URL (`X-Amz-Algorithm`, `X-Amz-Credential`, `X-Amz-Date`,
`X-Amz-Expires`, `X-Amz-SignedHeaders`, `X-Amz-Signature`). Either way the server rebuilds
the canonical request from what it received — the payload hash always from the body's
bytes, never from a header the client could set — and compares signatures.

What is refused, and why (AWS's wording where AWS has one; see the IAM user guide's
"Troubleshoot signed requests" and the SQS API reference's "Common Errors"):
- a payload hash header that does not match the body, or `UNSIGNED-PAYLOAD`: the body
  would not be covered by the signature;
- `SignedHeaders` without `host` (a signature could be replayed against another server),
  without `x-amz-date` when the date travels in that header (it could be replayed at any
  time), or leaving any `x-amz-*` header present unsigned (one such header, `X-Amz-Target`,
  selects the action);
- a scope that is not `<request date>/<region>/sqs/aws4_request`;
- for the embedded S3 store (service `s3`), the same rules, except that S3 lets a body go
  unsigned (`UNSIGNED-PAYLOAD`, what every presigned S3 URL signs, and
  `STREAMING-UNSIGNED-PAYLOAD-TRAILER`, botocore's PutObject over TLS) and signs the path
  as sent,
  not encoded a second time (botocore's S3SigV4Auth._normalize_url_path);
- a request time more than 15 minutes from the server's, and a presigned URL past its
  `X-Amz-Expires`;
- a session token that is not the one configured for the key, or one sent for a key that
  has none.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Protocol
from urllib.parse import parse_qsl, quote

from conveyor.service.validate import plain_name
from conveyor.sqs.errors import (
    AccessDenied,
    IncompleteSignature,
    InvalidClientTokenId,
    MissingAuthenticationToken,
    SignatureDoesNotMatch,
)

ALGORITHM = "AWS4-HMAC-SHA256"
SERVICE = "sqs"
S3_SERVICE = "s3"
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
# S3's aws-chunked body with a checksum trailer and no chunk signatures: what botocore sends
# for PutObject over TLS. The signature covers this literal in place of the body's hash.
STREAMING_UNSIGNED_TRAILER = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
TERMINATOR = "aws4_request"
MAX_SKEW = timedelta(minutes=15)  # SQS refuses requests signed more than 15 minutes away
MAX_EXPIRES_S = 7 * 24 * 3600  # the longest X-Amz-Expires AWS accepts (7 days)
DATE_FORMAT = "%Y%m%dT%H%M%SZ"

_SIGNATURE = re.compile(r"[0-9a-f]{64}")
_PRESIGN_PARAMS = ("X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-SignedHeaders",
                   "X-Amz-Signature")


class Secret(Protocol):
    """What the server knows of an access key: its secret, and its session token if the
    key is a temporary credential (access.AccessKey is one)."""

    @property
    def secret(self) -> str: ...

    @property
    def session_token(self) -> str | None: ...


# A class with __init__ written out, not a NamedTuple: one is made per request, and mypyc
# compiles this one (setup.py) where a NamedTuple's __new__ stays interpreted.
class Claim:
    """What a request says about its signature (nothing here is trusted yet)."""

    __slots__ = ("access_key", "date", "region", "service", "terminator", "signed_headers",
                 "signature", "amz_date", "expires_s", "token", "presigned")

    def __init__(self, access_key: str, date: str, region: str, service: str,
                 terminator: str, signed_headers: tuple[str, ...], signature: str,
                 amz_date: str, expires_s: int | None, token: str | None,
                 presigned: bool) -> None:
        self.access_key, self.date, self.region = access_key, date, region  # date: YYYYMMDD
        self.service, self.terminator, self.signed_headers = service, terminator, signed_headers
        self.signature, self.amz_date = signature, amz_date
        self.expires_s = expires_s  # presigned URLs only
        self.token, self.presigned = token, presigned


def read(query: str, headers: dict[str, str]) -> Claim | None:
    """The request's signature claim; None when it carries none. A claim with missing or
    malformed parts raises IncompleteSignature."""
    authorization = headers.get("authorization")
    if authorization is not None:
        return _from_header(authorization, headers)
    if "X-Amz-" in query:
        params = dict(parse_qsl(query, keep_blank_values=True))
        if "X-Amz-Algorithm" in params or "X-Amz-Signature" in params:
            return _from_query(params)
    return None


def _from_header(header: str, headers: dict[str, str]) -> Claim:
    # A client sends the same header every time but for the signature at its end, so the
    # rest is parsed once per client and day.
    rest, sep, signature = header.rpartition(", Signature=")
    if not (sep and signature.isalnum()):  # the signature is not last: parse it all
        rest, signature = header, _fields(header).get("Signature", "")
    scope = _scope(rest)
    if not signature:
        raise IncompleteSignature("Authorization header requires 'Signature' parameter.")
    return Claim(*scope, signature, headers.get("x-amz-date", ""), None,
                 headers.get("x-amz-security-token"), False)


@lru_cache(maxsize=1024)
def _scope(header: str) -> tuple[str, str, str, str, str, tuple[str, ...]]:
    """Key, date, region, service, terminator and signed headers: all but the signature."""
    algorithm, _, _ = header.partition(" ")
    if algorithm != ALGORITHM:
        raise IncompleteSignature(f"Unsupported AWS 'algorithm': {algorithm[:40]!r}; "
                                  f"expected {ALGORITHM!r}.")
    fields = _fields(header)
    missing = [f"Authorization header requires '{name}' parameter."
               for name in ("Credential", "SignedHeaders") if not fields.get(name)]
    if missing:
        raise IncompleteSignature(" ".join(missing))
    return (*_credential(fields["Credential"]), _signed_headers(fields["SignedHeaders"]))


def _from_query(params: dict[str, str]) -> Claim:
    missing = [name for name in _PRESIGN_PARAMS if not params.get(name)]
    if missing:
        raise IncompleteSignature("AWS query-string parameters must include "
                                  + ", ".join(f"'{name}'" for name in missing) + ".")
    if params["X-Amz-Algorithm"] != ALGORITHM:
        raise IncompleteSignature(f"X-Amz-Algorithm only supports {ALGORITHM!r}.")
    expires = params.get("X-Amz-Expires", "")
    if not (expires.isdigit() and len(expires) <= 7 and int(expires) <= MAX_EXPIRES_S):
        raise IncompleteSignature(f"X-Amz-Expires must be a number of seconds up to "
                                  f"{MAX_EXPIRES_S}.")
    return Claim(*_credential(params["X-Amz-Credential"]),
                 _signed_headers(params["X-Amz-SignedHeaders"]), params["X-Amz-Signature"],
                 params["X-Amz-Date"], int(expires), params.get("X-Amz-Security-Token"), True)


def _credential(value: str) -> tuple[str, str, str, str, str]:
    parts = value.split("/")
    if len(parts) != 5 or not all(parts):
        raise IncompleteSignature(f"Credential must have exactly 5 slash-delimited elements, "
                                  f"e.g. keyid/date/region/service/term, got '{value[:200]}'")
    return parts[0], parts[1], parts[2], parts[3], parts[4]


def _signed_headers(value: str) -> tuple[str, ...]:
    return tuple(value.split(";"))


def _fields(header: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for part in header[len(ALGORITHM) + 1:].split(","):
        key, _, value = part.strip().partition("=")
        fields[key] = value
    return fields


# --- verification -----------------------------------------------------------------------

def verify(claim: Claim | None, secrets: Mapping[str, Secret], method: str, path: str,
           query: str, headers: dict[str, str], body: bytes, now: datetime, *,
           service: str = SERVICE) -> None:
    """Raise the SQS error for a missing, unknown, malformed, stale or wrong signature."""
    if claim is None:
        raise MissingAuthenticationToken()
    known = secrets.get(claim.access_key)
    if known is None:
        raise InvalidClientTokenId()
    _check_signed_headers(claim, headers)
    _check_token(claim, known)
    signed_at = _check_scope(claim, now, service)
    _check_time(claim, signed_at, now)
    payload_hash = hashlib.sha256(body).hexdigest()
    declared = headers.get("x-amz-content-sha256")
    if service == S3_SERVICE and declared in (UNSIGNED_PAYLOAD, STREAMING_UNSIGNED_TRAILER):
        payload_hash = declared
    elif service == S3_SERVICE and claim.presigned and declared is None:
        payload_hash = UNSIGNED_PAYLOAD  # S3 presigned URLs always sign this constant
    elif declared is not None and declared != payload_hash:
        # Also UNSIGNED-PAYLOAD: SQS signs every body (S3 alone may leave it unsigned).
        raise SignatureDoesNotMatch("The provided 'x-amz-content-sha256' header does not "
                                    "match what was computed.")
    if not _SIGNATURE.fullmatch(claim.signature):
        raise SignatureDoesNotMatch()
    canonical_path = (path or "/") if service == S3_SERVICE else quote(path or "/", safe="/~")
    expected = signature(known.secret, claim, method, canonical_path, query, headers,
                         payload_hash)
    if not hmac.compare_digest(expected.encode(), claim.signature.encode()):
        raise SignatureDoesNotMatch()


def _check_token(claim: Claim, known: Secret) -> None:
    sent, wanted = claim.token, known.session_token
    if sent is None and wanted is None:
        return
    if sent is None or wanted is None or not hmac.compare_digest(
            sent.encode("utf-8", "surrogateescape"), wanted.encode()):
        raise InvalidClientTokenId()


def _check_signed_headers(claim: Claim, headers: dict[str, str]) -> None:
    signed = set(claim.signed_headers)
    if "host" not in signed:
        raise IncompleteSignature("'Host' or ':authority' must be a 'SignedHeader' in the AWS "
                                  "Authorization.")
    if not claim.presigned and "x-amz-date" not in signed:
        raise IncompleteSignature("'X-Amz-Date' must be a 'SignedHeader' in the AWS "
                                  "Authorization.")
    unsigned = sorted(name for name in headers
                      if name.startswith("x-amz-") and name not in signed)
    if unsigned:
        raise AccessDenied("There were headers present in the request which were not "
                           f"signed: {', '.join(unsigned)[:200]}")


def _check_scope(claim: Claim, now: datetime, service: str) -> datetime:
    try:
        signed_at = datetime.strptime(claim.amz_date, DATE_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        raise IncompleteSignature("The request must carry a valid X-Amz-Date "
                                  "(YYYYMMDD'T'HHMMSS'Z').") from None
    if claim.date != claim.amz_date[:8]:
        raise SignatureDoesNotMatch(
            f"Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date "
            f"from HTTP: '{claim.date[:20]}' != '{claim.amz_date[:8]}', from "
            f"'{claim.amz_date}'.")
    if claim.service != service:
        raise SignatureDoesNotMatch(f"Credential should be scoped to correct service: "
                                    f"'{service}'. ")
    if claim.terminator != TERMINATOR:
        raise SignatureDoesNotMatch(f"Credential should be scoped with a valid terminator: "
                                    f"'{TERMINATOR}', not '{claim.terminator[:40]}'. ")
    if not plain_name(claim.region) or len(claim.region) > 64:
        raise SignatureDoesNotMatch(f"Credential should be scoped to a valid region, not "
                                    f"'{claim.region[:64]}'. ")
    return signed_at


def _check_time(claim: Claim, signed_at: datetime, now: datetime) -> None:
    """The wording is SQS's own (recorded in aws/aws-sdk-go#487, a ReceiveMessage call)."""
    stamp = now.strftime(DATE_FORMAT)
    if signed_at - now > MAX_SKEW:
        raise SignatureDoesNotMatch(
            f"Signature not yet current: {claim.amz_date} is still later than "
            f"{(now + MAX_SKEW).strftime(DATE_FORMAT)} ({stamp} + 15 min.)")
    if claim.presigned:
        assert claim.expires_s is not None
        if now > signed_at + timedelta(seconds=claim.expires_s):
            raise SignatureDoesNotMatch(
                f"Signature expired: {claim.amz_date} is now earlier than "
                f"{(now - timedelta(seconds=claim.expires_s)).strftime(DATE_FORMAT)} "
                f"({stamp} - {claim.expires_s} sec.)")
    elif now - signed_at > MAX_SKEW:
        raise SignatureDoesNotMatch(
            f"Signature expired: {claim.amz_date} is now earlier than "
            f"{(now - MAX_SKEW).strftime(DATE_FORMAT)} ({stamp} - 15 min.)")


def signature(secret: str, claim: Claim, method: str, canonical_path: str, query: str,
              headers: dict[str, str], payload_hash: str) -> str:
    """The signature of a request whose path is already in its canonical form."""
    canonical = "\n".join([
        method,
        canonical_path,
        _canonical_query(query, claim.presigned),
        "".join(f"{name}:{' '.join(headers.get(name, '').split())}\n"
                for name in claim.signed_headers),
        ";".join(claim.signed_headers),
        payload_hash,
    ])
    scope = f"{claim.date}/{claim.region}/{claim.service}/{claim.terminator}"
    to_sign = "\n".join([ALGORITHM, claim.amz_date, scope,
                         hashlib.sha256(canonical.encode("utf-8", "surrogateescape")).hexdigest()])
    key = _signing_key(secret, claim.date, claim.region, claim.service)
    return hmac.new(key, to_sign.encode("utf-8", "surrogateescape"), hashlib.sha256).hexdigest()


@lru_cache(maxsize=256)
def _signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    """Four HMACs that only change with the day, region and key: once per client and day."""
    key = ("AWS4" + secret).encode()
    for part in (date, region, service, TERMINATOR):
        key = hmac.new(key, part.encode("utf-8", "surrogateescape"), hashlib.sha256).digest()
    return key


def _canonical_query(query: str, presigned: bool) -> str:
    """Decoded, then encoded the one canonical way: two spellings of the same parameters
    (`+` and `%20`) sign the same, and both mean the same to the Query protocol decoder."""
    pairs = parse_qsl(query, keep_blank_values=True)
    if presigned:  # the signature cannot sign itself
        pairs = [(k, v) for k, v in pairs if k != "X-Amz-Signature"]
    return "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(pairs))
