"""Facts about the machine srift runs on, recorded beside measurements taken on it."""
from __future__ import annotations

import os
import platform

__all__ = ["cpu_name", "memory_gib"]


def cpu_name() -> str:
    """The CPU's model name (/proc/cpuinfo), else what the platform module knows."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"


def memory_gib() -> float:
    """Physical memory, GiB. Raises OSError or ValueError where the OS does not say."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
