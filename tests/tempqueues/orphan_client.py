"""A client process the sweeper tests SIGKILL: it creates a host queue and waits to die.

Usage: python tests/tempqueues/orphan_client.py ENDPOINT PREFIX RETENTION_S
Prints the host queue's URL on one line once it exists.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

# The checkout goes last on the path, for `tests`: an installed conveyor (the compiled
# build's, `make test-compiled`) stays the one imported.
sys.path.append(str(Path(__file__).resolve().parents[2]))

from conveyor.tempqueues import TemporaryQueuesClient  # noqa: E402
from tests.support import sqs_client  # noqa: E402


def main() -> None:
    endpoint, prefix, retention_s = sys.argv[1], sys.argv[2], int(sys.argv[3])
    client = TemporaryQueuesClient(sqs_client(endpoint), prefix=prefix, retention_s=retention_s,
                                   heartbeat_interval_s=0.2, poll_wait_s=1, sweep_period_s=None)
    client.create_queue(QueueName="doomed")
    print(client.host_queue_urls[0], flush=True)
    while True:
        time.sleep(60)


if __name__ == "__main__":
    main()
