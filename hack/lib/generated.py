"""Files made by a script under hack/ and committed (hack/gen-fields.py, hack/gen-manifests.py): written,
or with ``--check`` compared with what the script would write."""

from __future__ import annotations

import sys
from pathlib import Path


def write_or_check(output: Path, text: str, *, check: bool, root: Path, script: str) -> int:
    """``text`` written to ``output`` (saying so), or with ``check`` nothing written: 0 when ``output`` holds
    exactly ``text``, else 1, saying that ``script`` makes it (``output`` is named relative to ``root``)."""
    shown = output.relative_to(root)
    if check:
        if not output.exists() or output.read_text() != text:
            print(f"{shown} is stale: run {script}", file=sys.stderr)
            return 1
        return 0
    output.write_text(text)
    print(f"wrote {shown}")
    return 0
