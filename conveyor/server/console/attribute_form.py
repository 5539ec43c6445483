"""A queue's attributes as a typed form: numbers with units and their ranges, choices as
menus, the dead-letter queue picked from the queues it may be, maxReceiveCount.

The ranges are the service's (service/attributes.py: `bounds`, and `check` decides each
value), so the form says what SetQueueAttributes would answer, beside the field, before
anything is set: a form with an error changes nothing and comes back with what was typed
and the error under its field.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from html import escape

import orjson

from conveyor.server.console import parts
from conveyor.server.console.forms import Form, FormError, pairs
from conveyor.service import QueueRecord, RequestContext, Service
from conveyor.service import attributes as attrs
from conveyor.sqs.errors import SqsError
from conveyor.sqs.limits import Limits

# Seconds-valued attributes, and the units they may be typed in.
SECONDS = ("VisibilityTimeout", "DelaySeconds", "MessageRetentionPeriod",
           "ReceiveMessageWaitTimeSeconds")
UNITS = {"s": 1, "min": 60, "h": 3600, "days": 86_400}
SIZE_UNITS = {"bytes": 1, "KiB": 1024, "MiB": 1024 * 1024}
LABELS = {"VisibilityTimeout": "Visibility timeout", "DelaySeconds": "Delivery delay",
          "MessageRetentionPeriod": "Retention period",
          "ReceiveMessageWaitTimeSeconds": "Receive wait time (long polling)",
          "MaximumMessageSize": "Maximum message size"}
# FIFO queues' attributes with their choices (SetQueueAttributes, AWS API reference).
CHOICES = {"ContentBasedDeduplication": ("false", "true"),
           "DeduplicationScope": ("queue", "messageGroup"),
           "FifoThroughputLimit": ("perQueue", "perMessageGroupId")}
MAX_RECEIVE_FIELD = "max_receive_count"
MAX_PICKED = 500  # queues offered as dead-letter queues; past that, a name is typed


@dataclass
class Typed:
    """What the operator typed (kept to show again) and the errors by field."""

    values: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


def largest_unit(n: int, units: dict[str, int]) -> tuple[int, str]:
    """`n` in the largest unit that holds it exactly: 345600 s -> (4, "days")."""
    for unit, size in sorted(units.items(), key=lambda u: -u[1]):
        if n and n % size == 0:
            return n // size, unit
    return n, next(iter(units))


def spoken(name: str, n: int) -> str:
    """A value as people say it: seconds in days, hours...; a size in MiB, KiB or bytes."""
    if name != "MaximumMessageSize":
        return parts.spoken_seconds(n)
    amount, unit = largest_unit(n, SIZE_UNITS)
    return f"{amount:,} {unit}"


def current(queue: QueueRecord) -> Typed:
    """The queue's attributes as the form shows them."""
    values = {}
    for name in (*SECONDS, "MaximumMessageSize"):
        n = int(queue.attributes.get(name, "0"))
        amount, unit = largest_unit(n, SIZE_UNITS if name == "MaximumMessageSize" else UNITS)
        values[name], values[f"{name}.unit"] = str(amount), unit
    for name in CHOICES:
        if queue.fifo:
            values[name] = queue.attributes.get(name, CHOICES[name][0])
    values["dlq"], values[MAX_RECEIVE_FIELD] = "", ""
    if queue.attributes.get("RedrivePolicy"):
        policy = orjson.loads(queue.attributes["RedrivePolicy"])
        values["dlq"] = str(policy.get("deadLetterTargetArn", "")).rsplit(":", 1)[-1]
        values[MAX_RECEIVE_FIELD] = str(policy.get("maxReceiveCount", ""))
    return Typed(values)


def changes(form: Form, ctx: RequestContext, queue: QueueRecord,
            limits: Limits) -> tuple[dict[str, str], Typed]:
    """SetQueueAttributes' Attributes from the form (only what changed), and what was
    typed with an error by each field the service would refuse."""
    typed = typed_of(form)
    wanted = numbers(form, limits, queue.attributes, typed)
    if queue.fifo:
        for name, choices in CHOICES.items():
            if form.get(name) in choices:
                wanted[name] = form[name]
    _redrive(form, ctx, limits, typed, wanted)
    try:
        wanted |= dict(pairs(form.get("attributes", "")))
    except FormError as error:
        typed.errors["attributes"] = str(error)
    for name, value in wanted.items():
        try:  # the service's own check of each value
            attrs.check(name, value, limits, queue.fifo, existing=True)
        except SqsError as error:
            typed.errors.setdefault(name if name != "RedrivePolicy" else "dlq", error.message)
    return ({k: v for k, v in wanted.items() if not _same(k, queue.attributes.get(k, ""), v)},
            typed)


def typed_of(form: Form) -> Typed:
    """A form's values as typed (its CSRF token left out), to show again."""
    return Typed({k: v for k, v in form.items() if k != "csrf"})


def numbers(form: Form, limits: Limits, attributes: dict[str, str],
            typed: Typed) -> dict[str, str]:
    """The number fields typed (each in its unit) as attribute values in seconds or
    bytes; one out of the service's range for a queue with `attributes` gets an error
    in `typed` instead."""
    wanted = {}
    for name in (*SECONDS, "MaximumMessageSize"):
        units = SIZE_UNITS if name == "MaximumMessageSize" else UNITS
        n = _whole(form, name, units, typed)
        if n is None:
            continue
        low, high = attrs.bounds(name, limits, attributes) or (0, 0)
        if not low <= n <= high:  # the service's range for it (attributes.RANGES)
            typed.errors[name] = (f"Must be from {spoken(name, low)} to {spoken(name, high)} "
                                  f"({low:,}–{high:,}{' s' if name in SECONDS else ''}); "
                                  f"{spoken(name, n)} is not.")
            continue
        wanted[name] = str(n)
    return wanted


def _whole(form: Form, name: str, units: dict[str, int], typed: Typed) -> int | None:
    text = form.get(name, "").strip()
    unit = form.get(f"{name}.unit", next(iter(units)))
    if not text:
        return None
    if not text.isdigit() or unit not in units:
        typed.errors[name] = f"A whole number of {'/'.join(units)}, not {text[:40]!r}."
        return None
    return int(text) * units[unit]


def _redrive(form: Form, ctx: RequestContext, limits: Limits, typed: Typed,
             wanted: dict[str, str]) -> None:
    dlq = form.get("dlq", "").strip()
    if not dlq:
        wanted["RedrivePolicy"] = ""  # none: SQS removes it given ""
        return
    text = form.get(MAX_RECEIVE_FIELD, "").strip() or "5"
    if not text.isdigit() or not 1 <= int(text) <= limits.max_receive_count:
        typed.errors[MAX_RECEIVE_FIELD] = (f"Must be a whole number from 1 to "
                                           f"{limits.max_receive_count:,}.")
        return
    wanted["RedrivePolicy"] = orjson.dumps({"deadLetterTargetArn": ctx.queue_arn(dlq),
                                            "maxReceiveCount": int(text)}).decode()


def _same(name: str, current_value: str, wanted: str) -> bool:
    return attrs.same_value(name, current_value, wanted)


def render(queue: QueueRecord, typed: Typed, candidates: list[str], limits: Limits) -> str:
    """The form's fields (inside a form made by parts.form), each with its unit, range
    and error."""
    out = [number_fields(typed, limits, queue.attributes)]
    if queue.fifo:
        for name, choices in CHOICES.items():
            chosen = typed.values.get(name, choices[0])
            menu = "".join(f'<option{" selected" if c == chosen else ""}>{c}</option>'
                           for c in choices)
            out.append(_field(name, typed, f'<select name="{name}">{menu}</select>', ""))
    out.append(_field("dlq", typed, _picker(typed.values.get("dlq", ""), candidates),
                      "", label="Dead-letter queue"))
    out.append(_field(MAX_RECEIVE_FIELD, typed, (
        f'<input name="{MAX_RECEIVE_FIELD}" type="number" min="1" step="1" '
        f'inputmode="numeric" placeholder="5" '
        f'value="{escape(typed.values.get(MAX_RECEIVE_FIELD, ""))}">'),
        f"1 to {limits.max_receive_count:,}", label="Receives before dead-lettering"))
    return "".join(out)


def number_fields(typed: Typed, limits: Limits, attributes: dict[str, str]) -> str:
    """The seconds and size fields, each with its unit menu, range (a queue's with
    `attributes`) and error: the edit form's and the create form's."""
    out = []
    for name in (*SECONDS, "MaximumMessageSize"):
        units = SIZE_UNITS if name == "MaximumMessageSize" else UNITS
        low, high = attrs.bounds(name, limits, attributes) or (0, 0)
        unit = typed.values.get(f"{name}.unit", next(iter(units)))
        menu = "".join(f'<option{" selected" if u == unit else ""}>{u}</option>'
                       for u in units)
        out.append(_field(name, typed, (
            f'<input name="{name}" type="number" min="0" step="1" inputmode="numeric" '
            f'value="{escape(typed.values.get(name, ""))}" aria-label="{LABELS[name]}">'
            f'<select name="{name}.unit" aria-label="unit of {LABELS[name]}">{menu}</select>'),
            f"{spoken(name, low)} to {spoken(name, high)}"))
    return "".join(out)


def _picker(chosen: str, candidates: list[str]) -> str:
    """The dead-letter queue: a menu of the queues it may be, or a name to type when
    there are too many to list."""
    if len(candidates) > MAX_PICKED:
        return (f'<input name="dlq" value="{escape(chosen)}" autocomplete="off" '
                'placeholder="queue name (empty: none)">')
    names = sorted(set(candidates) | ({chosen} if chosen else set()))
    options = "".join(f'<option{" selected" if n == chosen else ""}>{escape(n)}</option>'
                      for n in names)
    return f'<select name="dlq"><option value="">none</option>{options}</select>'


def _field(name: str, typed: Typed, control: str, hint: str, label: str = "") -> str:
    error = typed.errors.get(name)
    shown = label or LABELS.get(name, name)
    return (f'<div class="field{" invalid" if error else ""}"><label>{escape(shown)} '
            f'<span class="muted">{escape(hint)}</span><br>{control}</label>'
            + (f'<p class="field-error" role="alert">{escape(error)}</p>' if error else "")
            + "</div>")


async def candidates(service: Service, queue: QueueRecord,
                     sees: Callable[[str], bool]) -> list[str]:
    """The queues that may be this queue's dead-letter queue: its region's others of its
    type that the operator's key may see (whether it may send there is checked when the
    policy is set: server/authz.py)."""
    return [q.name for q in await service.all_queues()
            if q.region == queue.region and q.fifo == queue.fifo and q.id != queue.id
            and sees(q.name)]


def fields(queue: QueueRecord, typed: Typed, picked: list[str], limits: Limits) -> str:
    """The whole edit form's inside: typed fields, more attributes as lines, the button."""
    return (render(queue, typed, picked, limits)
            + '<label>More attributes <span class="muted">(<code>Name = value</code> a '
            "line, e.g. <code>RedriveAllowPolicy = {...}</code>)</span><br>"
            f'<textarea name="attributes">{escape(typed.values.get("attributes", ""))}'
            "</textarea></label><button>Save attributes</button>")
