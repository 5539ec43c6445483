"""Message bodies and attribute values: the ASCII fast path and the full character rule
agree."""

from __future__ import annotations

import pytest

from conveyor.service import validate
from conveyor.sqs.errors import InvalidMessageContents, InvalidParameterValue
from conveyor.sqs.limits import STRICT


@pytest.mark.parametrize("code", range(128))
def test_every_ascii_character_follows_the_sqs_rule(code: int) -> None:
    body = f"job {chr(code)} done"
    if code in (0x09, 0x0A, 0x0D) or code >= 0x20:  # #x9 | #xA | #xD | #x20 to #xD7FF
        validate.body(body)
    else:
        with pytest.raises(InvalidMessageContents):
            validate.body(body)


@pytest.mark.parametrize("body", ["caf\u00e9 \u2603 \U0001f600", "\ud7ff\ue000\ufffd"])
def test_unicode_bodies_take_the_full_rule(body: str) -> None:
    validate.body(body)
    with pytest.raises(InvalidMessageContents):
        validate.body(body + "\x00")
    with pytest.raises(InvalidMessageContents):
        validate.body(body + "\ufffe")


def test_attribute_values_follow_the_same_rule() -> None:
    def attributes(value: str) -> dict[str, dict[str, str]]:
        return {"kind": {"DataType": "String", "StringValue": value}}

    validate.message_attributes(attributes("tab\tand caf\u00e9"), STRICT)
    for bad in ("bell \x07", "caf\u00e9 \x00", "\ufffe"):
        with pytest.raises(InvalidParameterValue):
            validate.message_attributes(attributes(bad), STRICT)
