"""`python -m conveyor.worker`: the worker daemon alone (same options as `conveyor worker`)."""

from conveyor.worker.cli import worker_command

worker_command(prog_name="conveyor-worker")
