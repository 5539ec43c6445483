"""Periodic tasks: cron.yaml, leader election through a lease, exactly one enqueue per run."""
