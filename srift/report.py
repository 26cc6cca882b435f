"""Plain-text rendering of results for people: aligned tables and units."""
from __future__ import annotations

import math
from typing import Any, Sequence

__all__ = ["table", "hours", "usd", "seconds", "rate"]


def hours(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    if value < 1:
        return f"{value * 60:.1f} min"
    if value < 48:
        return f"{value:.2f} h"
    return f"{value / 24:.1f} d"


def usd(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"${value:,.2f}" if value >= 1 else f"${value:.4f}"


def seconds(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value * 1e3:.1f} ms" if value < 1 else f"{value:.3f} s"


def rate(value: float | None, unit: str = "/s") -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:,.1f}{unit}"


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str], right: Sequence[int] = ()) -> str:
    """Columns padded to their widest cell; `right` lists right-aligned column indexes."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(row: list[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule, *(line(r) for r in cells[1:])])
