"""Conveyor: a self-hosted worker tier speaking the Amazon SQS API."""

__version__ = "0.1.0"
