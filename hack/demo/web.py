#!/usr/bin/env python3
"""The demo's online service: an HTTP server whose every answer costs a little CPU (``--work-ms``)."""

import argparse
import os
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def burn(ms: float) -> int:
    end = time.perf_counter() + ms / 1000
    n = 0
    while time.perf_counter() < end:
        n += 1
    return n


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=int(os.environ.get("PORT", "18080")))
    p.add_argument("--work-ms", type=float, default=2.0)
    args = p.parse_args()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):  # noqa: N802
            body = f"{burn(args.work_ms)}\n".encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(f"web: serving on 127.0.0.1:{args.port}, {args.work_ms} ms of CPU per request", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
