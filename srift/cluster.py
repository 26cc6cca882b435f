"""Clusters as people write them: ``"2x p3.16xlarge + 4x g4dn.12xlarge:spot"``."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from srift import checks

if TYPE_CHECKING:
    from srift.catalog import Catalog

__all__ = ["Cluster", "ClusterGroup", "MARKETS"]

MARKETS = ("on-demand", "spot")
_MARKET_ALIASES = {"on-demand": "on-demand", "ondemand": "on-demand", "od": "on-demand", "spot": "spot"}
_GROUP = re.compile(
    r"^\s*(?:(?P<count>\d+)\s*[xX×*]\s*)?(?P<type>[A-Za-z0-9][A-Za-z0-9.\-_]*?)(?::(?P<market>[A-Za-z\-]+))?\s*$"
)


@dataclass(frozen=True)
class ClusterGroup:
    """``count`` instances of one type in one market."""

    instance_type: str
    count: int = 1
    market: str = "on-demand"

    def __post_init__(self) -> None:
        checks.integer(f"count of {self.instance_type!r}", self.count)
        if self.market not in MARKETS:
            raise ValueError(f"market must be one of {', '.join(MARKETS)}, got {self.market!r}")

    def __str__(self) -> str:
        suffix = ":spot" if self.market == "spot" else ""
        return f"{self.count}x {self.instance_type}{suffix}"

    def to_dict(self) -> dict[str, Any]:
        return {"instance_type": self.instance_type, "count": self.count, "market": self.market}


@dataclass(frozen=True)
class Cluster:
    """A multiset of instance groups, optionally pinned to a region."""

    groups: tuple[ClusterGroup, ...]
    region: str | None = None

    def __post_init__(self) -> None:
        if not self.groups:
            raise ValueError("cluster must have at least one instance group, got none")

    @classmethod
    def parse(cls, text: str, region: str | None = None) -> Cluster:
        """Parses ``"2x p3.16xlarge + 4x g4dn.12xlarge:spot"`` (count defaults to 1,
        market to on-demand; an optional ``@region`` suffix pins the region)."""
        if isinstance(text, Cluster):
            return text if region is None else cls(text.groups, region)
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"cluster must be text like '2x p3.16xlarge + 1x g5.xlarge:spot', got {text!r}")
        body = text.strip()
        if "@" in body:
            body, _, pinned = body.rpartition("@")
            pinned = pinned.strip()
            if not pinned:  # "2x p3.2xlarge @" read as no region in one place and refused in another
                raise ValueError(f"cluster {text!r} ends in '@' with no region after it: write '@us-east-1', "
                                 f"or leave '@' out for the default regions")
            if region is not None and region != pinned:
                raise ValueError(f"cluster region {pinned!r} conflicts with region={region!r}")
            region = pinned
        groups: dict[tuple[str, str], int] = {}
        for part in body.split("+"):
            match = _GROUP.match(part)
            if match is None:
                raise ValueError(
                    f"cluster group {part.strip()!r} is not of the form 'COUNTx TYPE[:spot]' "
                    f"(in cluster {text!r})"
                )
            count = int(match["count"]) if match["count"] else 1
            market_text = (match["market"] or "on-demand").lower()
            if market_text not in _MARKET_ALIASES:
                raise ValueError(f"market must be 'on-demand' or 'spot', got {match['market']!r} in {part.strip()!r}")
            key = (match["type"], _MARKET_ALIASES[market_text])
            if count < 1:
                raise ValueError(f"count must be >= 1, got {count} in {part.strip()!r}")
            groups[key] = groups.get(key, 0) + count
        return cls(tuple(ClusterGroup(t, c, m) for (t, m), c in groups.items()), region)

    def in_catalog(self, catalog: Catalog) -> Cluster:
        """This cluster as ``catalog`` spells it: each instance type by its catalog name
        (``P3.16XLARGE`` is ``p3.16xlarge``), groups of one type and market merged
        (``1x p3.16xlarge + 1x P3.16xlarge`` is ``2x p3.16xlarge``) and the region by its catalog
        name. Raises ValueError, with the nearest names, for a type the catalog does not know."""
        groups: dict[tuple[str, str], int] = {}
        for g in self.groups:
            key = (catalog.instance(g.instance_type).name, g.market)
            groups[key] = groups.get(key, 0) + g.count
        region = None if self.region is None else catalog.region_name(self.region)
        return Cluster(tuple(ClusterGroup(t, c, m) for (t, m), c in groups.items()), region)

    @property
    def instances(self) -> int:
        return sum(g.count for g in self.groups)

    def __str__(self) -> str:
        text = " + ".join(str(g) for g in self.groups)
        return f"{text} @{self.region}" if self.region else text

    def to_dict(self) -> dict[str, Any]:
        return {"groups": [g.to_dict() for g in self.groups], "region": self.region, "text": str(self)}
