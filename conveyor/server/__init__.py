"""The queue server: ASGI app, SigV4, long-poll waiters, metrics, CLI."""
