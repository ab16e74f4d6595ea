"""moto_server with DynamoDB's per-item atomicity: DynamoDB requests are applied one at a time.

moto's server is threaded, and its DynamoDB backend takes no lock: an `UpdateItem` computes
`ADD n` from the item it read, so two concurrent `ADD`s can both start from the old value and
one is lost, and two conditional writes can both pass their conditions. DynamoDB applies each
write to an item atomically and serialises transactions, and the runtime relies on that. This
launcher runs moto's own WSGI application under the same server moto_server uses, with one lock
around DynamoDB requests, so the tests check the runtime's conditions rather than moto's thread
safety. S3 and SQS requests (long polls included) stay concurrent.

It also takes a test's bulk seed of S3 objects in one request (`SEED_PATH`), stored by moto's own
S3 backend as a PutObject would store them: a test that needs 10,000 skills in a bucket spends a
second on them, not a minute of its run, and everything it then checks still goes through S3's API.

Usage: python moto_serial.py -H 127.0.0.1 -p PORT (the arguments of moto_server that tests use).
"""

import argparse
import base64
import json
import os
import threading

from moto.core import DEFAULT_ACCOUNT_ID
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from moto.s3.models import s3_backends
from werkzeug.serving import run_simple

DYNAMODB_TARGET_PREFIX = "DynamoDB_"
SEED_PATH = "/_local_stack/seed-s3-objects"


class SeedS3Objects:
    """WSGI middleware: `POST SEED_PATH` with `{"bucket": ..., "objects": [[key, base64 body], ...]}`
    puts the objects into the bucket through moto's S3 backend; every other request passes on."""

    def __init__(self, app):
        self.app = app

    def __call__(self, environ, start_response):
        if environ.get("PATH_INFO") != SEED_PATH or environ.get("REQUEST_METHOD") != "POST":
            return self.app(environ, start_response)
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
            seed = json.loads(environ["wsgi.input"].read(length))
            backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
            for key, body in seed["objects"]:
                backend.put_object(seed["bucket"], key, base64.b64decode(body))
        except Exception as err:  # The test that sent it reads why.
            start_response("400 Bad Request", [("Content-Type", "text/plain")])
            return [f"seed refused: {err!r}".encode()]
        start_response("204 No Content", [])
        return [b""]


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
    run_simple(args.host, args.port, SeedS3Objects(DynamoDbOneAtATime(app)), threaded=True)


if __name__ == "__main__":
    main()
