"""Plain text tables, as the simulator and the embedded CLI print them (shared by both modes)."""

from __future__ import annotations


def text_table(rows: list[tuple]) -> str:
    """Rows as aligned columns, kubectl-style (the first row is the header)."""
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    # a row longer than the header is cut to the header's columns
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=False)).rstrip() for r in rows)
