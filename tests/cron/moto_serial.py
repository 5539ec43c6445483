"""moto's server answering one request at a time: `python moto_serial.py HOST PORT`.

moto_server is threaded and its DynamoDB checks a ConditionExpression and then writes,
without a lock, so two concurrent conditional writes can both succeed (seen in CI: two
of eight campaigns won one lease). Amazon DynamoDB applies each conditional write
atomically; serving requests one by one gives the lease tests that guarantee.
"""

from __future__ import annotations

import sys

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import run_simple

if __name__ == "__main__":
    host, port = sys.argv[1], int(sys.argv[2])
    run_simple(host, port, DomainDispatcherApplication(create_backend_app), threaded=False,
               request_handler=MotoRequestHandler)
