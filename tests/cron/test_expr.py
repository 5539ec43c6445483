"""Cron expressions: a table of next times (month ends, leap days, dom+dow), and errors."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest
from croniter import croniter

from conveyor.cron.expr import CronExpr, CronSyntaxError


def t(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def nexts(expr: str, start: str, count: int) -> list[str]:
    parsed, moment, out = CronExpr.parse(expr), t(start), []
    for _ in range(count):
        moment = parsed.next_after(moment)
        out.append(moment.strftime("%Y-%m-%d %H:%M"))
    return out


TABLE = [
    # EB's own examples
    ("0 */12 * * *", "2026-01-31 11:59", ["2026-01-31 12:00", "2026-02-01 00:00"]),
    ("0 23 * * *", "2026-01-31 23:00", ["2026-02-01 23:00", "2026-02-02 23:00"]),
    # strictly after: a moment exactly on a run gives the next one; seconds are dropped
    ("* * * * *", "2026-03-01 10:00:59", ["2026-03-01 10:01", "2026-03-01 10:02"]),
    ("*/15 * * * *", "2026-03-01 10:07", ["2026-03-01 10:15", "2026-03-01 10:30"]),
    # month ends
    ("0 0 31 * *", "2026-01-31 00:00", ["2026-03-31 00:00", "2026-05-31 00:00"]),
    ("30 12 30 * *", "2026-01-30 12:30", ["2026-03-30 12:30", "2026-04-30 12:30"]),
    ("59 23 28-31 2 *", "2026-02-28 23:59", ["2027-02-28 23:59", "2028-02-28 23:59",
                                             "2028-02-29 23:59"]),
    ("0 0 1 * *", "2026-12-31 23:59", ["2027-01-01 00:00", "2027-02-01 00:00"]),
    # leap days (2100 is not a leap year)
    ("0 0 29 2 *", "2024-02-29 00:00", ["2028-02-29 00:00", "2032-02-29 00:00"]),
    ("0 0 29 feb *", "2096-03-01 00:00", ["2104-02-29 00:00"]),
    # day-of-month with day-of-week: both restricted -> either (Vixie OR)
    ("0 0 13 * FRI", "2026-02-01 00:00", ["2026-02-06 00:00", "2026-02-13 00:00",
                                          "2026-02-20 00:00", "2026-02-27 00:00",
                                          "2026-03-06 00:00"]),
    ("0 0 1 * 1", "2024-01-01 00:00", ["2024-01-08 00:00", "2024-01-15 00:00",
                                       "2024-01-22 00:00", "2024-01-29 00:00",
                                       "2024-02-01 00:00"]),
    # ... a field starting with '*' (even */2) is unrestricted -> both must match (AND)
    ("0 0 */2 * 1", "2024-01-01 00:00", ["2024-01-15 00:00", "2024-01-29 00:00",
                                         "2024-02-05 00:00"]),
    ("0 0 29 2 */7", "2024-01-01 00:00", ["2032-02-29 00:00"]),  # Feb 29 on a Sunday
    # names, ranges, steps, lists, 7 = Sunday
    ("0 9 * * mon-fri", "2026-01-30 09:00", ["2026-02-02 09:00", "2026-02-03 09:00"]),
    ("0 0 * * 7", "2026-01-01 00:00", ["2026-01-04 00:00", "2026-01-11 00:00"]),
    ("0 0 * * 5-7", "2026-01-01 00:00", ["2026-01-02 00:00", "2026-01-03 00:00",
                                         "2026-01-04 00:00", "2026-01-09 00:00"]),
    ("0 0 1 JAN,jul *", "2026-01-01 00:00", ["2026-07-01 00:00", "2027-01-01 00:00"]),
    ("5,10-12/2,50/5 4 * * *", "2026-01-01 00:00", ["2026-01-01 04:05", "2026-01-01 04:10",
                                                    "2026-01-01 04:12", "2026-01-01 04:50",
                                                    "2026-01-01 04:55", "2026-01-02 04:05"]),
    ("0 0-23/6 * * *", "2026-01-01 18:00", ["2026-01-02 00:00", "2026-01-02 06:00"]),
    ("@weekly", "2026-01-01 00:00", ["2026-01-04 00:00"]),
    ("@monthly", "2026-01-15 00:00", ["2026-02-01 00:00"]),
]


@pytest.mark.parametrize(("expr", "start", "expected"), TABLE)
def test_next_times(expr: str, start: str, expected: list[str]) -> None:
    assert nexts(expr, start, len(expected)) == expected


def test_runs_between_excludes_start_and_includes_end() -> None:
    expr = CronExpr.parse("*/10 * * * *")
    got = list(expr.runs_between(t("2026-01-01 00:00"), t("2026-01-01 00:30")))
    assert [m.minute for m in got] == [10, 20, 30]


@pytest.mark.parametrize(("expr", "problem"), [
    ("", "empty"),
    ("* * * *", "expected 5 fields"),
    ("* * * * * *", "expected 5 fields"),
    ("60 * * * *", "minute value 60 is out of range 0-59"),
    ("* 24 * * *", "hour value 24 is out of range 0-23"),
    ("* * 0 * *", "day-of-month value 0 is out of range 1-31"),
    ("* * * 13 *", "month value 13 is out of range 1-12"),
    ("* * * * 8", "day-of-week value 8 is out of range 0-7"),
    ("5-1 * * * *", "runs backwards"),
    ("*/0 * * * *", "step '0'"),
    ("1,,2 * * * *", "empty list item"),
    ("* * * FOO *", "not a number or a name (JAN-DEC)"),
    ("0 0 L * *", "Quartz"),
    ("0 0 ? * *", "Quartz"),
    ("0 0 31 2 *", "never run"),
    ("0 0 30 feb *", "never run"),
    ("@reboot", "@reboot"),
    ("@often", "unknown macro"),
])
def test_syntax_errors_name_the_field_and_problem(expr: str, problem: str) -> None:
    with pytest.raises(CronSyntaxError) as info:
        CronExpr.parse(expr)
    assert problem in str(info.value)


def _agrees_with_croniter(expr: str) -> bool:
    """croniter ORs dom and dow even when one starts with '*' (Vixie ANDs): skip those."""
    fields = expr.split()
    both = fields[2] != "*" and fields[4] != "*"
    return not (both and (fields[2].startswith("*") or fields[4].startswith("*")))


def _random_field(rng: random.Random, low: int, high: int) -> str:
    kind = rng.choice(["*", "n", "range", "step", "list", "rangestep"])
    a, b = sorted(rng.sample(range(low, high + 1), 2))
    return {"*": "*", "n": str(a), "range": f"{a}-{b}", "step": f"*/{rng.randint(1, 9)}",
            "list": f"{a},{b}", "rangestep": f"{a}-{b}/{rng.randint(1, 4)}"}[kind]


def test_agrees_with_croniter_on_random_expressions() -> None:
    rng = random.Random(4)
    checked = 0
    while checked < 300:
        expr = " ".join(_random_field(rng, lo, hi) for lo, hi in
                        ((0, 59), (0, 23), (1, 28), (1, 12), (0, 6)))
        if not _agrees_with_croniter(expr):
            continue
        start = datetime(2024, 1, 1, tzinfo=UTC) + (rng.random() * (datetime(2030, 1, 1,
                                                    tzinfo=UTC) - datetime(2024, 1, 1,
                                                    tzinfo=UTC)))
        ours, theirs = CronExpr.parse(expr), croniter(expr, start)
        moment = start
        for _ in range(5):
            moment = ours.next_after(moment)
            assert moment == theirs.get_next(datetime), expr
        checked += 1
