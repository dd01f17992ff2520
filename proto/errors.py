"""The one base class for bad input, on both sides.

A file, a flag, a manifest, a profile, a configuration, a report or a state record that is wrong
raises :class:`InputError` (or a subclass) with a message naming what and where.  The command-line
entry points catch exactly this class: bad input becomes one line and exit status 2, while any
other exception — a bug — stays a traceback.

It derives from :class:`ValueError` so that code parsing a value with ``except ValueError`` keeps
working whether the problem came from Python (``int("x")``) or from our own checks.
"""

from __future__ import annotations


class InputError(ValueError):
    """Bad input, with a message naming what and where."""
