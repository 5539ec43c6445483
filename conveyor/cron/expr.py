"""Five-field cron expressions, evaluated in UTC with Vixie cron's semantics.

    minute hour day-of-month month day-of-week
    0-59   0-23 1-31         1-12  0-7 (0 and 7 are Sunday)

Each field is a comma list of `*`, `N`, `N-M`, each optionally `/STEP`, plus `N/STEP`
(from N to the end of the range, as cronie and most libraries accept). Months and days may
be given by their English three-letter names (`JAN`, `mon-fri`). The macros `@yearly`,
`@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight` and `@hourly` are accepted.

Day-of-month and day-of-week combine as in Vixie cron: when both are restricted the day
matches if *either* matches; when either field starts with `*` (including `*/2`) both must
match. croniter disagrees on the `*/N` case (it ORs), which is why Conveyor evaluates
expressions itself; the tests cross-check the two wherever they should agree.
"""

from __future__ import annotations

import calendar
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
MACROS = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
# Longest search for the next run: 400 years is one full Gregorian cycle, so an expression
# that matches no day in it never matches (only reachable for Feb 29 AND a weekday).
_SEARCH_MONTHS = 400 * 12


class CronSyntaxError(ValueError):
    """An expression that is not valid cron; the message names the field and the problem."""


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()
    name_base: int = 0  # the value of names[0]


_FIELDS = (
    _Field("minute", 0, 59),
    _Field("hour", 0, 23),
    _Field("day-of-month", 1, 31),
    _Field("month", 1, 12, MONTHS, 1),
    _Field("day-of-week", 0, 7, DAYS, 0),
)


@dataclass(frozen=True, slots=True)
class CronExpr:
    """A parsed expression. `next_after` and `runs_between` work on aware UTC datetimes."""

    text: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday (7 folded into 0)
    dom_star: bool
    dow_star: bool

    @classmethod
    def parse(cls, text: str) -> CronExpr:
        """Parse `text`, raising CronSyntaxError that says what is wrong and where."""
        if not isinstance(text, str) or not text.strip():
            raise CronSyntaxError("the schedule is empty")
        source = text.strip()
        expanded = _expand_macro(source)
        parts = expanded.split()
        if len(parts) != 5:
            msg = (f"expected 5 fields (minute hour day-of-month month day-of-week), "
                   f"got {len(parts)}")
            raise CronSyntaxError(msg)
        values = [_parse_field(part, field) for part, field in zip(parts, _FIELDS, strict=True)]
        minutes, hours, days, months, weekdays = values
        expr = cls(source, tuple(sorted(minutes)), tuple(sorted(hours)), frozenset(days),
                   frozenset(months), frozenset(d % 7 for d in weekdays),
                   parts[2].startswith("*"), parts[4].startswith("*"))
        expr._check_satisfiable()
        return expr

    def _check_satisfiable(self) -> None:
        if not self.dom_star and not self.dow_star:
            return  # OR: every week has a matching weekday
        longest = {m: (29 if m == 2 else calendar.monthrange(2001, m)[1]) for m in self.months}
        if not any(d <= longest[m] for m in self.months for d in self.days):
            msg = "day-of-month never occurs in the given month(s), so it would never run"
            raise CronSyntaxError(msg)

    def matches_day(self, day: date) -> bool:
        """True if the expression runs on `day` (month, day-of-month and day-of-week)."""
        if day.month not in self.months:
            return False
        dom = day.day in self.days
        dow = (day.isoweekday() % 7) in self.weekdays
        if self.dom_star or self.dow_star:
            return dom and dow
        return dom or dow

    def next_after(self, moment: datetime) -> datetime:
        """The first run strictly after `moment` (aware UTC)."""
        start = moment.astimezone(UTC).replace(second=0, microsecond=0, tzinfo=None)
        start += timedelta(minutes=1)
        day = start.date()
        first = True
        for _ in range(_SEARCH_MONTHS):
            if day.month in self.months:
                found = self._in_month(day, start if first else None)
                if found is not None:
                    return found.replace(tzinfo=UTC)
            first = False
            day = _first_of_next_month(day)
        msg = f"{self.text!r} has no run within 400 years"
        raise CronSyntaxError(msg)

    def runs_between(self, after: datetime, until: datetime) -> Iterator[datetime]:
        """Every run `t` with `after < t <= until`, in order."""
        current = after
        while True:
            current = self.next_after(current)
            if current > until:
                return
            yield current

    def _in_month(self, day: date, start: datetime | None) -> datetime | None:
        """The first run in `day`'s month, from `day` on (and from `start`'s time that day)."""
        last = calendar.monthrange(day.year, day.month)[1]
        for dom in range(day.day, last + 1):
            current = day.replace(day=dom)
            if not self.matches_day(current):
                continue
            hour0, minute0 = (start.hour, start.minute) if start and current == day else (0, 0)
            for hour in self.hours:
                if hour < hour0:
                    continue
                for minute in self.minutes:
                    if hour == hour0 and minute < minute0:
                        continue
                    return datetime(current.year, current.month, current.day, hour, minute)
        return None


def _first_of_next_month(day: date) -> date:
    return date(day.year + day.month // 12, day.month % 12 + 1, 1)


def _expand_macro(text: str) -> str:
    if not text.startswith("@"):
        return text
    key = text.lower()
    if key == "@reboot":
        raise CronSyntaxError("@reboot is not a schedule (there is no boot to run at)")
    if key not in MACROS:
        msg = f"unknown macro {text!r}; use one of {', '.join(MACROS)}"
        raise CronSyntaxError(msg)
    return MACROS[key]


def _parse_field(text: str, field: _Field) -> set[int]:
    values: set[int] = set()
    for item in text.split(","):
        if not item:
            msg = f"{field.name} field {text!r} has an empty list item"
            raise CronSyntaxError(msg)
        values |= _parse_item(item, field)
    return values


def _parse_item(item: str, field: _Field) -> set[int]:
    base, slash, step_text = item.partition("/")
    step = 1
    if slash:
        if not step_text.isdigit() or int(step_text) < 1:
            msg = f"{field.name} step {step_text!r} in {item!r} must be a whole number >= 1"
            raise CronSyntaxError(msg)
        step = int(step_text)
    if base == "*":
        low, high = field.low, field.high
    elif "-" in base:
        low_text, _, high_text = base.partition("-")
        low, high = _value(low_text, field, item), _value(high_text, field, item)
        if low > high:
            msg = f"{field.name} range {base!r} runs backwards ({low} > {high})"
            raise CronSyntaxError(msg)
    else:
        low = _value(base, field, item)
        high = field.high if slash else low
    return set(range(low, high + 1, step))


def _value(text: str, field: _Field, item: str) -> int:
    upper = text.upper()
    if field.names and upper in field.names:
        return field.names.index(upper) + field.name_base
    if not text.isdigit():
        hint = f" or a name ({field.names[0]}-{field.names[-1]})" if field.names else ""
        if text in ("?", "L", "W") or "#" in text or text.endswith(("L", "W")):
            hint += "; Quartz extensions (? L W #) are not cron"
        msg = f"{field.name} value {text!r} in {item!r} is not a number{hint}"
        raise CronSyntaxError(msg)
    value = int(text)
    if not field.low <= value <= field.high:
        msg = f"{field.name} value {value} is out of range {field.low}-{field.high}"
        raise CronSyntaxError(msg)
    return value
