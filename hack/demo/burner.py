#!/usr/bin/env python3
"""The demo's offline work: CPU-heavy iterations for ``--seconds``, a JSON line of progress every second."""

import argparse
import json
import time


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=120.0)
    args = p.parse_args()
    end = time.monotonic() + args.seconds
    total, last_n, last_t = 0, 0, time.monotonic()
    x = 1
    while time.monotonic() < end:
        for _ in range(20000):
            x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        total += 20000
        now = time.monotonic()
        if now - last_t >= 1.0:
            print(json.dumps({"t": round(time.time(), 1), "iterations": total,
                              "per_second": round((total - last_n) / (now - last_t))}), flush=True)
            last_n, last_t = total, now
    print(json.dumps({"done": True, "iterations": total}), flush=True)


if __name__ == "__main__":
    main()
