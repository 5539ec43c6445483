"""Leases in an Amazon DynamoDB table, the way Elastic Beanstalk elects its cron leader.

Table (created on first use when missing, on-demand billing), one item per lease:

    LeaseName  S  partition key: the lease name
    Holder     S  who holds it
    Version    N  bumped by every successful write (the condition of UpdateLease)
    ExpiresAt  N  epoch milliseconds by the *writer's* clock: DynamoDB has no server time,
                  so daemons' clocks must agree to well within the lease TTL (NTP does)
    Data       S  opaque; survives handovers

Every write is one UpdateItem with a ConditionExpression, so it is atomic. botocore is
synchronous; each call runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import botocore.session
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from conveyor.clock import Clock
from conveyor.cron.leases.base import Lease, LeaseConflict, LeaseUnavailable

_RETRIES = Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=5,
                  read_timeout=10)
_ACQUIRE_IF = "attribute_not_exists(LeaseName) OR Holder = :h OR ExpiresAt <= :now"
_UPDATE_IF = "Holder = :h AND Version = :v AND ExpiresAt > :now"


class DynamoDBLeases:
    """LeaseBackend on one DynamoDB table (endpoint from AWS_ENDPOINT_URL_DYNAMODB or given)."""

    def __init__(self, table: str, *, region: str | None = None,
                 endpoint_url: str | None = None, client: Any = None,
                 clock: Clock | None = None, create_table: bool = True) -> None:
        self.table = table
        self._client = client or botocore.session.get_session().create_client(
            "dynamodb", region_name=region or None, endpoint_url=endpoint_url or None,
            config=_RETRIES)
        # Real wall time, never a cron clock's: expiry is compared with other writers'.
        self._clock = clock or Clock()
        self._create_table = create_table
        self._ready = not create_table

    async def acquire(self, name: str, holder: str, ttl_s: float) -> Lease:
        """Take the item if absent, ours, or expired."""
        now = self._clock.now_ms()
        return await self._write(
            name, "SET Holder = :h, ExpiresAt = :exp, Version = if_not_exists(Version, :zero)"
            " + :one, #d = if_not_exists(#d, :empty)", _ACQUIRE_IF,
            {":h": _s(holder), ":exp": _n(now + int(ttl_s * 1000)), ":now": _n(now),
             ":zero": _n(0), ":one": _n(1), ":empty": _s("")})

    async def update(self, name: str, holder: str, version: int, ttl_s: float,
                     data: str) -> Lease:
        """Renew and write data, conditional on holder, version and not expired."""
        now = self._clock.now_ms()
        return await self._write(
            name, "SET ExpiresAt = :exp, Version = Version + :one, #d = :data", _UPDATE_IF,
            {":h": _s(holder), ":v": _n(version), ":exp": _n(now + int(ttl_s * 1000)),
             ":now": _n(now), ":one": _n(1), ":data": _s(data)})

    async def release(self, name: str, holder: str) -> None:
        """Expire it now if ours; a lease held by someone else is left alone."""
        with contextlib.suppress(LeaseConflict):
            await self._write(name, "SET ExpiresAt = :zero, Version = Version + :one",
                              "Holder = :h", {":h": _s(holder), ":zero": _n(0), ":one": _n(1)},
                              names=False)

    async def get(self, name: str) -> Lease | None:
        """A strongly consistent read."""
        await self._ensure_table()
        answer = await self._call("get_item", TableName=self.table, Key=_key(name),
                                  ConsistentRead=True)
        item = answer.get("Item")
        return _lease(item, self._clock.now_ms()) if item else None

    async def close(self) -> None:
        """Close botocore's connection pool."""
        self._client.close()

    async def _write(self, name: str, expression: str, condition: str,
                     values: dict[str, Any], *, names: bool = True) -> Lease:
        await self._ensure_table()
        extra = {"ExpressionAttributeNames": {"#d": "Data"}} if names else {}
        try:
            answer = await self._call(
                "update_item", TableName=self.table, Key=_key(name),
                UpdateExpression=expression, ConditionExpression=condition,
                ExpressionAttributeValues=values, ReturnValues="ALL_NEW", **extra)
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                raise LeaseConflict(f"lease {name}: condition failed") from None
            raise LeaseUnavailable(str(exc)) from exc
        return _lease(answer["Attributes"], self._clock.now_ms())

    async def _ensure_table(self) -> None:
        if self._ready:
            return
        try:
            await self._call("describe_table", TableName=self.table)
        except ClientError as exc:
            if _code(exc) != "ResourceNotFoundException":
                raise LeaseUnavailable(str(exc)) from exc
            await self._create()
        self._ready = True

    async def _create(self) -> None:
        try:
            await self._call("create_table", TableName=self.table, BillingMode="PAY_PER_REQUEST",
                             KeySchema=[{"AttributeName": "LeaseName", "KeyType": "HASH"}],
                             AttributeDefinitions=[{"AttributeName": "LeaseName",
                                                    "AttributeType": "S"}])
        except ClientError as exc:
            if _code(exc) != "ResourceInUseException":  # another daemon made it first
                raise LeaseUnavailable(str(exc)) from exc
        waiter = self._client.get_waiter("table_exists")
        await asyncio.to_thread(waiter.wait, TableName=self.table,
                                WaiterConfig={"Delay": 1, "MaxAttempts": 60})

    async def _call(self, operation: str, **params: Any) -> dict[str, Any]:
        method = getattr(self._client, operation)
        try:
            return await asyncio.to_thread(method, **params)
        except ClientError:
            raise
        except BotoCoreError as exc:
            raise LeaseUnavailable(f"DynamoDB {operation}: {exc}") from exc


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _key(name: str) -> dict[str, Any]:
    return {"LeaseName": _s(name)}


def _s(text: str) -> dict[str, str]:
    return {"S": text}


def _n(number: int) -> dict[str, str]:
    return {"N": str(number)}


def _lease(item: dict[str, Any], now_ms: int) -> Lease:
    """The item as a Lease; its time left is judged by this writer's clock, as the
    conditions of every write are."""
    expires_ms = int(item.get("ExpiresAt", {}).get("N", "0"))
    return Lease(item["LeaseName"]["S"], item.get("Holder", {}).get("S", ""),
                 int(item.get("Version", {}).get("N", "0")), expires_ms,
                 item.get("Data", {}).get("S", ""), max(0, expires_ms - now_ms))
