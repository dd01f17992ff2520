"""``python -m scheduler``: the scheduler's command line.

``simulate`` runs the real scheduler over manifests and prints the result;
bad input exits with status 2 and a message naming the file, the object and
the problem.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from datetime import datetime

from .api.manifests import ManifestError
from .framework.config import ConfigError
from .simulator import load_config_or_default, render_table, simulate

EXIT_BAD_INPUT = 2


def parse_time(text: str | None) -> datetime:
    """ISO 8601; local time unless it carries an offset; now if not given."""
    if not text:
        return datetime.now().astimezone()
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"--at: invalid time {text!r}: expected ISO 8601 like 2026-11-21T22:30:00") from None
    return stamp if stamp.tzinfo else stamp.astimezone()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m scheduler", description="Scoria scheduler")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    sub = parser.add_subparsers(dest="command", required=True)
    sim = sub.add_parser("simulate", help="schedule manifests with a fixed clock and print the result")
    sim.add_argument("-f", "--filename", action="append", required=True, metavar="FILE",
                     help="YAML/JSON file or folder of them (repeatable)")
    sim.add_argument("--config", metavar="FILE", help="scheduler configuration (Volcano format); default built in")
    sim.add_argument("--at", metavar="ISO8601", help="the fixed clock (local time unless an offset is given)")
    sim.add_argument("--cycles", type=int, metavar="N", help="run exactly N cycles instead of until settled")
    sim.add_argument("--scheduler-name", action="append", metavar="NAME",
                     help="schedule pending pods with this spec.schedulerName (repeatable; default: scoria). "
                          "Pods without one are always scheduled; pods naming another scheduler are left alone")
    sim.add_argument("-o", "--output", choices=("json", "table"), default="table")
    return parser


def cmd_simulate(args: argparse.Namespace) -> int:
    if args.cycles is not None and args.cycles < 1:
        raise ValueError("--cycles: must be at least 1")
    at = parse_time(args.at)
    config = load_config_or_default(args.config)
    sim = simulate(args.filename, config=config, at=at, cycles=args.cycles,
                   scheduler_names=args.scheduler_name or ("scoria",))
    if args.output == "json":
        json.dump(sim.to_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(render_table(sim))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        if args.command == "simulate":
            return cmd_simulate(args)
    except (ManifestError, ConfigError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # output piped into head(1) and the like
        sys.stderr.close()
        return 0
    return 1
