"""The worker's Payload* options: defaults from the Extended Client, clear errors."""

from __future__ import annotations

import re

import pytest

from conveyor.worker.config import ConfigError, load_config

QUEUE = "http://127.0.0.1:9324/000000000000/jobs"


def test_defaults_resolve_any_bucket_and_delete_after_success():
    config = load_config({"WorkerQueueURL": QUEUE})
    assert config.payload_endpoint_url == ""  # Amazon S3 (or AWS_ENDPOINT_URL_S3)
    assert config.payload_bucket == ""
    assert config.delete_payloads is True  # ExtendedClientConfiguration.cleanupS3Payload


@pytest.mark.parametrize(("options", "message"), [
    ({"PayloadEndpointURL": "s3.example.com"}, "PayloadEndpointURL must be an http(s) URL"),
    ({"PayloadAccessKey": "no-colon"}, "PayloadAccessKey must be KEY:SECRET"),
    ({"DeletePayloads": "maybe"}, "DeletePayloads must be true or false"),
])
def test_bad_values_are_refused_with_the_option_named(options, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config({"WorkerQueueURL": QUEUE, **options})


def test_options_come_from_the_environment_too():
    config = load_config({"WorkerQueueURL": QUEUE}, env={
        "CONVEYOR_PAYLOAD_ENDPOINT_URL": "http://127.0.0.1:9000",
        "CONVEYOR_PAYLOAD_BUCKET": "jobs-payloads", "CONVEYOR_DELETE_PAYLOADS": "false"})
    assert config.payload_endpoint_url == "http://127.0.0.1:9000"
    assert config.payload_bucket == "jobs-payloads"
    assert config.delete_payloads is False
