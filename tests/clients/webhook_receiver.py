"""A webhook receiver on loopback for the integration tests, verifying each delivery with the
Standard Webhooks library (`standardwebhooks`), as a real receiver would.

Usage: webhook_receiver.py [--bind ADDRESS ...]

Listens on one free port at each loopback address given (127.0.0.1 by default) and prints
`listening PORT` once ready. Any POST outside `/_control/` is a delivery: it is verified against
every key registered under a label, recorded, and answered with the next scripted status (200 once
the script is spent). The control routes, as JSON:
  POST /_control/secrets    {"<label>": "whsec_..."}   the keys to verify with
  POST /_control/answers    [500, 410]                 the statuses of the next deliveries
  GET  /_control/deliveries                            every delivery so far, oldest first
"""

import argparse
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

LOCK = threading.Lock()
SECRETS = {}
ANSWERS = []
DELIVERIES = []


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def reply(self, status, body=None):
        data = json.dumps(body if body is not None else {}).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def read_body(self):
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length).decode()

    def do_GET(self):
        if self.path == "/_control/deliveries":
            with LOCK:
                self.reply(200, list(DELIVERIES))
        else:
            self.reply(404)

    def do_POST(self):
        body = self.read_body()
        if self.path == "/_control/secrets":
            with LOCK:
                SECRETS.update(json.loads(body))
            return self.reply(200)
        if self.path == "/_control/answers":
            with LOCK:
                ANSWERS.extend(json.loads(body))
            return self.reply(200)
        headers = {name.lower(): value for name, value in self.headers.items()}
        verified = {}
        parsed = None
        with LOCK:
            secrets = dict(SECRETS)
        for label, secret in secrets.items():
            try:
                parsed = Webhook(secret).verify(body, headers)
                verified[label] = True
            except WebhookVerificationError:
                verified[label] = False
        with LOCK:
            status = ANSWERS.pop(0) if ANSWERS else 200
            DELIVERIES.append({
                "path": self.path,
                "local_address": self.server.server_address[0],
                "id": headers.get("webhook-id"),
                "timestamp": headers.get("webhook-timestamp"),
                "signature": headers.get("webhook-signature"),
                "content_type": headers.get("content-type"),
                "verified": verified,
                "payload": parsed if parsed is not None else json.loads(body),
                "answered": status,
            })
        self.reply(status)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bind", action="append", default=[])
    args = parser.parse_args()
    addresses = args.bind or ["127.0.0.1"]
    servers = [ThreadingHTTPServer((addresses[0], 0), Handler)]
    port = servers[0].server_address[1]
    servers += [ThreadingHTTPServer((address, port), Handler) for address in addresses[1:]]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"listening {port}", flush=True)
    # Runs until the test kills it (or closes its stdin).
    sys.stdin.read()


if __name__ == "__main__":
    main()
