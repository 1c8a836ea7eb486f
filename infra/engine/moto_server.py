"""Local DynamoDB-compatible engine: moto's WSGI app served single-threaded.

The stock ``moto_server`` is threaded and moto's backends hold no lock, so two
concurrent conditional writes could both pass their condition. Serving one
request at a time makes each request apply atomically, the way DynamoDB
applies a conditional write.

Usage: moto_server.py [--host 127.0.0.1] [--port 0]
After binding it prints exactly one line ``LISTENING <port>`` to stdout, then
serves until killed (SIGTERM/SIGINT exit 0).
"""

import argparse
import os
import signal
import sys

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import make_server


class QuietRequestHandler(MotoRequestHandler):
    """Drops the per-request access log line; errors are still logged."""

    def log_request(self, code="-", size="-"):
        pass


def _exit(signum, frame):
    sys.exit(0)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1", help="address to bind")
    parser.add_argument("--port", type=int, default=0, help="port to bind; 0 picks a free one")
    args = parser.parse_args(argv)

    app = DomainDispatcherApplication(create_backend_app)
    # threaded=False, processes=1: one request at a time, and werkzeug then
    # speaks HTTP/1.0 (no keep-alive), so one idle client cannot block others.
    server = make_server(
        args.host,
        args.port,
        app,
        threaded=False,
        processes=1,
        request_handler=QuietRequestHandler,
    )
    port = server.server_address[1]
    # Some moto responses embed the server's own URL.
    os.environ["MOTO_PORT"] = str(port)

    signal.signal(signal.SIGTERM, _exit)
    signal.signal(signal.SIGINT, _exit)

    sys.stdout.write(f"LISTENING {port}\n")
    sys.stdout.flush()
    try:
        server.serve_forever()
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
