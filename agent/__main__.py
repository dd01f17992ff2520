import signal
import sys

# Before anything slow (the imports below take a tenth of a second): a SIGTERM or Ctrl-C while the agent
# starts is kept, and agent.cli acts on it once it knows what it has to stop — never an exit half-way.
EARLY: list[int] = []
for _sig in (signal.SIGINT, signal.SIGTERM):
    signal.signal(_sig, lambda signum, frame: EARLY.append(signum))

from agent.cli import main  # noqa: E402

sys.exit(main(early=EARLY))
