"""SigV4 signing through botocore, which already knows every corner of it."""

from __future__ import annotations

import logging

import botocore.session
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

log = logging.getLogger(__name__)

# Local servers usually accept any key; these stand in when the chain finds none.
_PLACEHOLDER = Credentials("conveyor", "conveyor")


def resolve_credentials(access_key: str | None, secret_key: str | None,
                        session_token: str | None, endpoint_url: str) -> Credentials:
    """Explicit keys if given, else botocore's normal chain, else local placeholders."""
    if access_key and secret_key:
        return Credentials(access_key, secret_key, session_token)
    found = botocore.session.get_session().get_credentials()
    if found is not None:
        return found
    if "amazonaws.com" in endpoint_url:
        log.warning("no AWS credentials found for %s; requests will be rejected", endpoint_url)
    return _PLACEHOLDER


class Signer:
    """Signs one SQS request at a time (refreshable credentials are re-read each call)."""

    def __init__(self, credentials: Credentials, region: str) -> None:
        self._credentials = credentials
        self._region = region

    def headers(self, url: str, body: bytes, headers: dict[str, str]) -> dict[str, str]:
        """Return `headers` plus the SigV4 `Authorization`, `X-Amz-Date` (and token) headers."""
        request = AWSRequest(method="POST", url=url, data=body, headers=headers)
        frozen = self._credentials.get_frozen_credentials()
        SigV4Auth(frozen, "sqs", self._region).add_auth(request)
        return dict(request.headers.items())
