#!/usr/bin/env python3
"""The demo's online service: an HTTP server whose every answer costs a little CPU (``--work-ms``)."""

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from hack.lib.cpuwork import burn  # noqa: E402 — the repository's own helpers, as hack/bench uses them
from hack.lib.online import http_server  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=int(os.environ.get("PORT", "18080")))
    p.add_argument("--work-ms", type=float, default=2.0)
    args = p.parse_args()

    def respond(handler) -> None:
        body = f"{burn(args.work_ms)}\n".encode()
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    server = http_server(args.port, respond)
    print(f"web: serving on 127.0.0.1:{args.port}, {args.work_ms} ms of CPU per request", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
