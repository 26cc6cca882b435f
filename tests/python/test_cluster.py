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


def test_public_functions_survive_importing_every_submodule():
    """A submodule named like a public function would replace it on the package once
    imported (PEP 562 trap): import everything, then check the functions are callable."""
    import importlib
    import pkgutil

    import srift

    for info in pkgutil.iter_modules(srift.__path__, "srift."):
        if info.name != "srift._core":
            importlib.import_module(info.name)
    for name in ("profile", "predict", "recommend", "pareto"):
        assert callable(getattr(srift, name)), name
    assert isinstance(srift.Catalog.default(), srift.Catalog)


def test_a_capital_x_counts_and_the_catalog_spells_the_rest():
    from srift.catalog import Catalog

    parsed = Cluster.parse("2X P3.16XLARGE + 1x p3.16xlarge + 4X g4dn.12xlarge:SPOT @US-West-2")
    assert [(g.instance_type, g.count, g.market) for g in parsed.groups] == [
        ("P3.16XLARGE", 2, "on-demand"), ("p3.16xlarge", 1, "on-demand"), ("g4dn.12xlarge", 4, "spot")]
    named = parsed.in_catalog(Catalog.default())
    assert str(named) == "3x p3.16xlarge + 4x g4dn.12xlarge:spot @us-west-2"
    with pytest.raises(ValueError, match="instance = 'p3.16xlarg': unknown EC2 instance type.*'p3.16xlarge'"):
        Cluster.parse("1x p3.16xlarg").in_catalog(Catalog.default())


def test_region_names_are_read_case_insensitively(resnet50_profile):
    from srift.catalog import Catalog
    from srift.planning import resolve_regions
    from srift.prediction import predict

    catalog = Catalog.default()
    assert resolve_regions(catalog, "US-EAST-1, Eu-West-1") == ["us-east-1", "eu-west-1"]
    assert resolve_regions(catalog, [" us-west-2"]) == ["us-west-2"]
    with pytest.raises(ValueError, match=r"regions \['MARS-1'\] are not in the catalog"):
        resolve_regions(catalog, "MARS-1")  # named as given
    # a typo names the region meant, as an unknown instance type does (a first-time user's review)
    with pytest.raises(ValueError, match=r"^regions \['us-east1', 'eu-wset-1'\] are not in the catalog \(did you "
                                         r"mean 'us-east-1', 'eu-west-1'\?\); known: af-south-1, "):
        resolve_regions(catalog, "us-east1,eu-wset-1")
    with pytest.raises(ValueError, match=r"^region 'us-east1' is not in the catalog \(did you mean 'us-east-1'"):
        predict(resnet50_profile, "1x g5.xlarge", 8, region="us-east1")


def test_all_regions_and_the_catalogs_lookups_read_a_region_in_any_case():
    # resolve_regions read "US-EAST-1" but not "ALL" (a region not in the catalog), and the
    # catalog's own lookups compared the raw name: price("p3.2xlarge", "US-EAST-1") was refused
    # where price("P3.2XLARGE", "us-east-1") was read, and interruption_class said "unknown"
    from srift.catalog import Catalog
    from srift.planning import resolve_regions

    catalog = Catalog.default()
    for text in ("ALL", " all ", "All"):
        assert resolve_regions(catalog, text) == catalog.regions
    # a region named twice (in another case or not) is one region, searched once
    assert resolve_regions(catalog, "us-east-1, US-EAST-1,eu-west-1") == ["us-east-1", "eu-west-1"]
    assert resolve_regions(catalog, ["EU-WEST-1", "eu-west-1 "]) == ["eu-west-1"]
    assert catalog.price("p3.2xlarge", "US-EAST-1") == catalog.price("p3.2xlarge", "us-east-1") > 0
    assert catalog.price_info("p3.2xlarge", " Us-East-1", "spot") == catalog.price_info("p3.2xlarge", "us-east-1", "spot")
    known = catalog.with_overrides({"schema": "srift.catalog-overrides/1", "interruption": [
        {"instance": "p3.2xlarge", "region": "us-east-1", "class": "5-10%"}]})
    assert known.interruption_class("p3.2xlarge", "US-EAST-1") == "5-10%"
    assert catalog.spot_zones("p3.2xlarge", "US-EAST-1") == catalog.spot_zones("p3.2xlarge", "us-east-1")
    assert ([o.instance for o in catalog.offers("US-WEST-2")] == [o.instance for o in catalog.offers("us-west-2")]
            and all(o.region == "us-west-2" for o in catalog.offers("US-WEST-2")))
    assert catalog.instance_types("EU-WEST-1") == catalog.instance_types("eu-west-1")
    with pytest.raises(ValueError, match=r"region = 'US-ESAT-1': not a region in the catalog; did you mean .*'us-east-1'"):
        catalog.price("p3.2xlarge", "US-ESAT-1")


def test_an_at_with_no_region_is_refused():
    # a held cluster "1x g5.xlarge @" was read as no region, a predicted one refused as region ''
    for text in ("1x g5.xlarge @", "1x g5.xlarge @  "):
        with pytest.raises(ValueError, match="ends in '@' with no region after it"):
            Cluster.parse(text)
