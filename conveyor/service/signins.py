"""How fast the console's sign-in may be guessed at: failures slow down further tries.

Failed sign-ins are counted per access key id and per client address, in the store, so
every node sharing it (PostgreSQL) counts the same failures and a restart forgets none.
After a subject's first few failures, each further failure locks it out for a time that
doubles, up to a cap; while either subject of a sign-in is locked out, the sign-in is
refused without looking at its secret (the right secret too: the lock does not tell a
guesser when a guess was right). A successful sign-in clears its key's count, never its
address's (or one's own key would reset the count of an address guessing at others'); a
subject with no failure for FORGET_AFTER_S starts again from nothing.

The numbers follow OWASP's Authentication Cheat Sheet ("Account Lockout": a lockout
threshold, an observation window and a lockout duration; "Rather than implementing a fixed
lockout duration (e.g., ten minutes), some applications use an exponential lockout, where
the lockout duration starts as a very short period (e.g., one second), but doubles after
each failed login attempt"; and the counter "should be associated with the account itself,
rather than the source IP address", so a guesser that spreads over addresses still meets the
key's count). The schedule is the one OWASP's Web Security Testing Guide gives as an
acceptable lockout (WSTG-ATHN-03, "Testing for Weak Lock Out Mechanism", on Amazon Cognito):
"After 5 failed sign-in attempts with a password, the user is locked out for one second. The
lockout duration doubles with each failed attempt, with a maximum of 15 minutes"; attempts
made during the lockout are refused and, as in Cognito, do not lengthen it. The cap keeps a
guesser from shutting a key's owner out for longer than 15 minutes. An address may fail more
often than a key before it is slowed (several people behind one NAT sign in from it), and an
IPv6 address counts as its /64 network, since one host is given a whole /64 to pick
addresses from (RFC 4291 §2.5.1's interface identifiers).
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass

from conveyor.clock import Clock
from conveyor.store.base import Store

FORGET_AFTER_S = 24 * 3600  # a subject with no failure for a day starts afresh


@dataclass(frozen=True, slots=True)
class Backoff:
    """Lockouts after repeated failures: `first_lock_s` after the `lock_after`-th failure,
    doubling with each failure after that, never longer than `max_lock_s`."""

    lock_after: int
    first_lock_s: float
    max_lock_s: float

    def lock_ms(self, failures: int) -> int:
        """How long a subject is locked out after its `failures`-th failure."""
        over = failures - self.lock_after
        if over < 0:
            return 0
        # Doubling from the first lock; the exponent is capped so the power stays small.
        return int(min(self.first_lock_s * 2 ** min(over, 32), self.max_lock_s) * 1000)


KEY = Backoff(lock_after=5, first_lock_s=1.0, max_lock_s=15 * 60.0)
# Several people behind one NAT share an address: it may fail more often than one key.
ADDRESS = Backoff(lock_after=20, first_lock_s=1.0, max_lock_s=15 * 60.0)


def address_subject(address: str) -> str:
    """The address a sign-in counts against: an IPv4 address, an IPv6 address's /64 (an
    IPv4-mapped one as IPv4), or the text as given when it is no IP address at all."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network(f"{ip}/64", strict=False))
    return str(ip)


class SignInThrottle:
    """The throttle's rule over the store's counts (module docstring); times from `clock`."""

    def __init__(self, store: Store, clock: Clock, key: Backoff = KEY,
                 address: Backoff = ADDRESS) -> None:
        self.store = store
        self.clock = clock
        self.backoffs = {"key": key, "address": address}

    @staticmethod
    def subjects(key_id: str, address: str) -> list[str]:
        """The store's subjects of a sign-in by `key_id` from `address`."""
        return [f"key:{key_id}", f"address:{address_subject(address)}"]

    async def locked_s(self, key_id: str, address: str) -> int:
        """Whole seconds until a sign-in by `key_id` from `address` may be tried; 0: now."""
        counts = await self.store.sign_in_failures(self.subjects(key_id, address))
        return self._wait_s(counts)

    async def failed(self, key_id: str, address: str) -> int:
        """Count a failed sign-in; whole seconds until the next may be tried (0: now)."""
        now_ms = self.clock.now_ms()
        counts = await self.store.count_sign_in_failure(
            self.subjects(key_id, address), now_ms, now_ms - FORGET_AFTER_S * 1000)
        return self._wait_s(counts)

    async def succeeded(self, key_id: str) -> None:
        """Clear the key's failures (its address's stay counted)."""
        await self.store.clear_sign_in_failures([f"key:{key_id}"])

    def _wait_s(self, counts: dict[str, tuple[int, int]]) -> int:
        now_ms = self.clock.now_ms()
        wait_ms = 0
        for subject, (failures, last_ms) in counts.items():
            if last_ms < now_ms - FORGET_AFTER_S * 1000:
                continue  # forgotten, though not yet deleted
            backoff = self.backoffs[subject.partition(":")[0]]
            wait_ms = max(wait_ms, last_ms + backoff.lock_ms(failures) - now_ms)
        return math.ceil(wait_ms / 1000) if wait_ms > 0 else 0
