"""srift.hostinfo: what it reports on odd hosts (blank or malformed /proc/cpuinfo lines, no
sysconf, containers with a memory limit)."""
from __future__ import annotations

import os
import platform

import pytest

from srift import hostinfo


def test_cpu_name_skips_blank_and_malformed_lines(tmp_path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\nmodel name\t:   \nmodel name\t: Example CPU @ 2.0GHz\n")
    assert hostinfo.cpu_name(info) == "Example CPU @ 2.0GHz"
    info.write_text("processor\t: 0\nmodel name\t:\n")
    assert hostinfo.cpu_name(info) == (platform.processor() or platform.machine() or "CPU")
    assert hostinfo.cpu_name(tmp_path / "missing") == (platform.processor() or platform.machine() or "CPU")


def test_memory_is_the_container_limit_where_lower(tmp_path) -> None:
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    assert hostinfo.memory_gib(()) == pytest.approx(physical)
    limit = tmp_path / "memory.max"
    limit.write_text(f"{2**30}\n")
    assert hostinfo.memory_gib((limit,)) == pytest.approx(1.0)
    limit.write_text("max\n")  # cgroup v2: no limit
    assert hostinfo.memory_gib((limit,)) == pytest.approx(physical)
    limit.write_text(f"{2**63 - 4096}\n")  # cgroup v1's "no limit" sentinel
    assert hostinfo.memory_gib((limit,)) == pytest.approx(physical)
    assert hostinfo.memory_gib((tmp_path / "missing", limit)) == pytest.approx(physical)


def test_memory_refuses_what_the_os_does_not_say(monkeypatch) -> None:
    monkeypatch.setattr(os, "sysconf", lambda name: -1)
    with pytest.raises(OSError, match="no physical memory"):
        hostinfo.memory_gib(())
    monkeypatch.delattr(os, "sysconf")
    with pytest.raises(OSError, match="does not report"):
        hostinfo.memory_gib(())
