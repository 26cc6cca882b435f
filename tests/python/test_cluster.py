from __future__ import annotations

import pytest

from srift.cluster import Cluster, ClusterGroup


def test_parse_counts_markets_and_region():
    c = Cluster.parse("2x p3.16xlarge + 4x g4dn.12xlarge:spot @us-west-2")
    assert c.groups == (ClusterGroup("p3.16xlarge", 2, "on-demand"), ClusterGroup("g4dn.12xlarge", 4, "spot"))
    assert c.region == "us-west-2"
    assert c.instances == 6
    assert str(c) == "2x p3.16xlarge + 4x g4dn.12xlarge:spot @us-west-2"
    assert Cluster.parse(str(c)) == c


def test_bare_type_is_one_instance_and_duplicates_merge():
    c = Cluster.parse("p3.2xlarge + 2 x p3.2xlarge")
    assert c.groups == (ClusterGroup("p3.2xlarge", 3, "on-demand"),)


@pytest.mark.parametrize("text, fragment", [
    ("", "cluster must be text"),
    ("2x p3 2xlarge", "is not of the form"),
    ("0x p3.2xlarge", "count must be >= 1"),
    ("2x p3.2xlarge:reserved", "market must be"),
])
def test_bad_clusters_name_the_problem(text, fragment):
    with pytest.raises(ValueError, match=fragment):
        Cluster.parse(text)
