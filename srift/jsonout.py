"""JSON that srift prints or writes for machines: strict, so any parser reads it.

JSON has no NaN or Infinity (Python's json writes them, strict parsers refuse them): every
non-finite float becomes null. Objects json cannot encode are written as their str().
"""
from __future__ import annotations

import json
import math
from typing import Any


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float (at any depth) as None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def dumps(value: Any, *, indent: int | None = 2) -> str:
    """Strict JSON text of ``value``."""
    return json.dumps(json_safe(value), indent=indent, default=str, allow_nan=False)
