"""Facts about the machine srift runs on, recorded beside measurements taken on it."""
from __future__ import annotations

import os
import platform
from pathlib import Path

__all__ = ["cpu_name", "memory_gib"]

# cgroup v2, then v1: a container's memory limit, where it has one
_CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


def cpu_name(cpuinfo: str | os.PathLike[str] = "/proc/cpuinfo") -> str:
    """The CPU's model name (/proc/cpuinfo), else what the platform module knows."""
    try:
        with open(cpuinfo) as fh:
            for line in fh:
                key, sep, value = line.partition(":")
                if sep and key.strip() == "model name" and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"


def memory_gib(cgroup_limits: tuple[str | os.PathLike[str], ...] = _CGROUP_LIMITS) -> float:
    """Memory this process may use, GiB: the physical memory, or the container's (cgroup)
    limit where that is lower (the first of ``cgroup_limits`` that exists). Raises OSError
    where the OS does not say."""
    try:
        page, pages = os.sysconf("SC_PAGE_SIZE"), os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError) as exc:  # no sysconf (Windows) or no such name
        raise OSError(f"the OS does not report its physical memory: {exc}") from None
    if not (page > 0 and pages > 0):
        raise OSError(f"the OS reports no physical memory (page size {page}, pages {pages})")
    total = page * pages
    for path in cgroup_limits:
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) < total:  # "max" or a huge v1 sentinel: no limit
            total = int(text)
        break
    return total / 2**30
