"""Argument checks shared by the Python API: a bad value raises ValueError naming the
argument and the value, before it reaches the C++ core (whose int fields stop at 2^31 - 1
and whose bindings would raise a bare TypeError)."""
from __future__ import annotations

import math
import numbers
from typing import Any

INT_MAX = 2**31 - 1  # the core's counts and batches are C++ ints


def integer(name: str, value: Any, *, low: int = 1, high: int = INT_MAX) -> int:
    """``value`` as an int in [low, high]; bools and floats are refused, numpy integers taken."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer in {low}..{high}, got {value!r}")
    return int(value)


def optional_integer(name: str, value: Any, *, low: int = 1, high: int = INT_MAX) -> int | None:
    return None if value is None else integer(name, value, low=low, high=high)


def positive(name: str, value: Any) -> float:
    """``value`` as a finite float > 0; bools, strings and non-finite numbers are refused, numpy
    scalars taken."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    try:
        number = float(value)
    except OverflowError:  # an int past a double
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}") from None
    if not math.isfinite(number) or number <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return number


def optional_positive(name: str, value: Any) -> float | None:
    return None if value is None else positive(name, value)


# A million years of 30 ms iterations: past it run times and costs are noise (1e308 printed
# 300-digit times); the CLI's --iterations and the sweep's share the bound.
MAX_ITERATIONS = 1e12


def iterations(name: str, value: Any) -> float:
    """``value`` as a float in [1, MAX_ITERATIONS]; ValueError naming ``name`` and the value.
    Below one iteration a run is no training run (1e-322 underflowed every plan's totals to 0
    and the branch-and-bound, its bounds all 0, pruned nothing)."""
    number = positive(name, value)
    if number < 1:
        raise ValueError(f"{name} must be at least 1 (iterations of the training run), got {value!r}")
    if number > MAX_ITERATIONS:
        raise ValueError(f"{name} must be at most {MAX_ITERATIONS:g}, got {value!r}")
    return number


def optional_iterations(name: str, value: Any) -> float | None:
    return None if value is None else iterations(name, value)


def instance(name: str, value: Any, cls: type, how: str) -> Any:
    """``value`` when it is a ``cls``; else ValueError naming the argument, what it got and
    ``how`` to make one (a path or a dict where an object belongs used to raise a bare
    AttributeError deep inside)."""
    if not isinstance(value, cls):
        shown = repr(value)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        article = "an" if cls.__name__[0] in "AEIOU" else "a"
        raise ValueError(f"{name} must be {article} {cls.__name__} ({how}), got {type(value).__name__} {shown}")
    return value


def optional_instance(name: str, value: Any, cls: type, how: str) -> Any:
    return None if value is None else instance(name, value, cls, how)
