#!/usr/bin/env python3
"""The demo's steady load and latency probe: requests at a fixed rate, a JSON line of latencies every second.

Open loop: each request is due at a fixed time and its latency is counted from then, so time spent
waiting behind a slow answer counts too.  Prints ``{"t", "sent", "ok", "errors", "p50_ms", "p99_ms"}``.
"""

import argparse
import http.client
import json
import os
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from hack.lib.stats import nearest_rank  # noqa: E402 — the repository's own helpers, as hack/bench uses them


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=int(os.environ.get("PORT", "18080")))
    p.add_argument("--rate", type=float, default=50.0, help="requests a second")
    p.add_argument("--workers", type=int, default=8)
    args = p.parse_args()
    lock = threading.Lock()
    window: list[float] = []
    counts = {"sent": 0, "ok": 0, "errors": 0}
    start = time.monotonic()
    interval = 1.0 / args.rate
    slot = [0]

    def worker() -> None:
        conn = None
        while True:
            with lock:
                k = slot[0]
                slot[0] += 1
            due = start + k * interval
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            try:
                conn = conn or http.client.HTTPConnection("127.0.0.1", args.port, timeout=5)
                conn.request("GET", "/")
                conn.getresponse().read()
                ok = True
            except OSError:
                conn, ok = None, False
            latency = (time.monotonic() - due) * 1000
            with lock:
                counts["sent"] += 1
                counts["ok" if ok else "errors"] += 1
                if ok:
                    window.append(latency)

    for _ in range(args.workers):
        threading.Thread(target=worker, daemon=True).start()
    while True:
        time.sleep(1.0)
        with lock:
            lat, window[:] = sorted(window), []
            line = dict(counts)
        if lat:
            line.update(p50_ms=round(nearest_rank(lat, 0.5), 2), p99_ms=round(nearest_rank(lat, 0.99), 2))
        line["t"] = round(time.time(), 1)
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
