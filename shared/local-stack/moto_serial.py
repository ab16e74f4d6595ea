"""moto_server with DynamoDB's per-item atomicity: DynamoDB requests are applied one at a time.

moto's server is threaded, and its DynamoDB backend takes no lock: an `UpdateItem` computes
`ADD n` from the item it read, so two concurrent `ADD`s can both start from the old value and
one is lost, and two conditional writes can both pass their conditions. DynamoDB applies each
write to an item atomically and serialises transactions, and the runtime relies on that. This
launcher runs moto's own WSGI application under the same server moto_server uses, with one lock
around DynamoDB requests, so the tests check the runtime's conditions rather than moto's thread
safety. S3 and SQS requests (long polls included) stay concurrent.

Usage: python moto_serial.py -H 127.0.0.1 -p PORT (the arguments of moto_server that tests use).
"""

import argparse
import os
import threading

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import run_simple

DYNAMODB_TARGET_PREFIX = "DynamoDB_"


class DynamoDbOneAtATime:
    """WSGI middleware: holds one lock while a DynamoDB request is handled and its body is built."""

    def __init__(self, app):
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ, start_response):
        if not environ.get("HTTP_X_AMZ_TARGET", "").startswith(DYNAMODB_TARGET_PREFIX):
            return self.app(environ, start_response)
        with self.lock:
            # The body is read inside the lock: moto may build it lazily from the item.
            return list(self.app(environ, start_response))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, required=True)
    args = parser.parse_args()
    # As moto_server does: some backends build URLs from it, and errors come back with details.
    os.environ.setdefault("MOTO_PORT", str(args.port))
    app = DomainDispatcherApplication(create_backend_app)
    app.debug = True
    run_simple(args.host, args.port, DynamoDbOneAtATime(app), threaded=True)


if __name__ == "__main__":
    main()
