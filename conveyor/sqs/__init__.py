"""The SQS wire: codecs for the JSON 1.0 and Query protocols, errors, limits, MD5s."""
