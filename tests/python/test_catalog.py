"""The bundled EC2 catalog snapshot and the Catalog API (docs/contracts.md, "Catalog JSON")."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from srift.catalog import INTERRUPTION_CLASSES, Catalog, GpuSpec, InstanceType, OfferInfo

REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture(scope="module")
def cat() -> Catalog:
    return Catalog.default()


@pytest.fixture()
def raw(cat: Catalog) -> dict:
    return cat.to_dict()


# ----------------------------------------------------------------------------- snapshot coverage

REQUIRED_TYPES = [
    "p3.2xlarge", "p3.8xlarge", "p3.16xlarge", "p3dn.24xlarge", "p4d.24xlarge", "p4de.24xlarge",
    "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge",
    "g4dn.xlarge", "g4dn.2xlarge", "g4dn.4xlarge", "g4dn.8xlarge", "g4dn.12xlarge", "g4dn.16xlarge", "g4dn.metal",
    "g5.xlarge", "g5.2xlarge", "g5.4xlarge", "g5.8xlarge", "g5.12xlarge", "g5.16xlarge", "g5.24xlarge", "g5.48xlarge",
    "g6.xlarge", "g6.12xlarge", "g6.48xlarge", "g6e.xlarge", "g6e.12xlarge", "g6e.48xlarge", "gr6.4xlarge", "gr6.8xlarge",
]


def test_schema_and_provenance(raw: dict) -> None:
    assert raw["schema"] == "srift.catalog/1"
    assert raw["generated_at"]
    names = {t["name"] for t in raw["tables"]}
    assert {"gpus", "instances", "on_demand", "spot", "interruption"} <= names
    for table in raw["tables"]:
        assert table["source"], table
    # Interruption data has no public source: the snapshot says so rather than guessing.
    intr = next(t for t in raw["tables"] if t["name"] == "interruption")
    assert "No public snapshot" in intr["note"]


@pytest.mark.parametrize("name", REQUIRED_TYPES)
def test_required_types_present_and_offered(cat: Catalog, name: str) -> None:
    it = cat.instance(name)
    assert it.status == "current"
    assert it.regions, f"{name} offered nowhere"
    assert it.gpu in cat.gpu_keys()
    assert it.gpu_count >= 1 and it.vcpus >= 1 and it.memory_gib > 0 and it.network_gbps > 0


def test_retired_families(cat: Catalog) -> None:
    for name in ("p2.xlarge", "p2.8xlarge", "p2.16xlarge", "g3.4xlarge", "g3.8xlarge", "g3.16xlarge", "g3s.xlarge"):
        assert cat.instance(name).status == "retired"
    assert all(o.instance[:2] not in ("p2", "g3") for o in cat.offers("us-east-1"))
    assert any(o.instance.startswith("p2.") for o in cat.offers("us-east-1", include_retired=True))


def test_no_non_nvidia_or_fractional_types(cat: Catalog) -> None:
    names = cat.instance_names()
    for bad in ("g4ad.xlarge", "inf2.xlarge", "trn1.32xlarge", "dl1.24xlarge", "g6f.large", "gr6f.4xlarge"):
        assert bad not in names
    assert all(cat.gpu(cat.instance(n).gpu).name.startswith("NVIDIA") for n in names)


def test_v0_regions_have_prices(cat: Catalog) -> None:
    # Issue 2 part 4: the v0 families in us-east-1 / us-west-2 (eu-west-1 where AWS offers them).
    for region in ("us-east-1", "us-west-2"):
        for fam in ("p3", "p3dn", "p4d", "p4de", "p5", "g4dn", "g5", "g6", "g6e"):
            priced = [o for o in cat.offers(region, ["on-demand"]) if o.instance.split(".")[0] == fam]
            assert priced, f"no priced {fam} type in {region}"
    eu = {o.instance.split(".")[0] for o in cat.offers("eu-west-1", ["on-demand"])}
    assert {"p3", "p3dn", "p4d", "g4dn", "g5"} <= eu


def test_interconnect_and_peaks(cat: Catalog) -> None:
    p3 = cat.instance("p3.16xlarge")
    assert (p3.gpu, p3.gpu_count, p3.interconnect, p3.intra_node_gbytes_s) == ("V100-16GB", 8, "nvlink", 150.0)
    assert cat.instance("p3.2xlarge").interconnect == "none"
    assert cat.instance("p4d.24xlarge").interconnect == "nvswitch"
    assert cat.instance("p4d.24xlarge").efa and cat.instance("p4d.24xlarge").network_cards == 4
    assert cat.instance("p5.48xlarge").network_gbps == 3200.0
    assert cat.instance("g4dn.12xlarge").interconnect == "pcie"
    # Sustained baseline, not the burst ceiling, for "Up to" NICs.
    assert cat.instance("g4dn.xlarge").network_gbps == 5.0
    assert cat.instance("g4dn.xlarge").network_peak_gbps == 25.0
    v100 = cat.gpu("V100-16GB")
    assert (v100.fp32_tflops, v100.fp16_tflops, v100.tf32_tflops, v100.bf16_tflops) == (15.7, 125.0, None, None)
    a100 = cat.gpu("A100-40GB")
    assert (a100.tf32_tflops, a100.bf16_tflops, a100.memory_bandwidth_gbytes_s) == (156.0, 312.0, 1555.0)
    assert cat.gpu("H100-80GB").bf16_tflops == pytest.approx(989.4)
    for key in cat.gpu_keys():
        g = cat.gpu(key)
        assert g.source.startswith("https://"), key
        assert g.fp32_tflops > 0 and g.memory_bandwidth_gbytes_s > 0 and g.memory_gib > 0


def test_prices_carry_timestamp_and_source(raw: dict) -> None:
    for name, by_region in raw["on_demand"].items():
        for region, rec in by_region.items():
            assert rec["usd_per_hour"] > 0 and rec["as_of"] == "2026-01-21" and rec["source"], (name, region)
            assert region in raw["instances"][name]["regions"]
    for name, by_region in raw["spot"].items():
        for region, rec in by_region.items():
            zones = raw["spot_zones"][name][region]
            assert rec["usd_per_hour"] == min(z["usd_per_hour"] for z in zones if not z["local_zone"])
            assert "as_of" in rec and rec["source"]
    # Every offered pair has an interruption class, "unknown" in the snapshot.
    for name, inst in raw["instances"].items():
        for region in inst["regions"]:
            assert raw["interruption"][name][region] in INTERRUPTION_CLASSES


def test_p5e_offered_but_unpriced(cat: Catalog) -> None:
    # p5e is sold through capacity blocks: offered, but the on-demand table has no row for it.
    assert cat.instance("p5e.48xlarge").regions
    assert all(cat.price("p5e.48xlarge", r) is None for r in cat.instance("p5e.48xlarge").regions)


def test_counts(raw: dict) -> None:
    assert len(raw["instances"]) >= 60
    assert len(raw["regions"]) >= 20
    assert sum(len(v) for v in raw["on_demand"].values()) >= 700
    assert sum(len(z) for v in raw["spot_zones"].values() for z in v.values()) >= 190


# ----------------------------------------------------------------------------- API

@pytest.mark.parametrize(
    ("device", "keys"),
    [
        ("T4", ["T4"]),
        ("Tesla T4", ["T4"]),
        ("V100", ["V100-16GB", "V100-32GB"]),
        ("A100", ["A100-40GB", "A100-80GB"]),
        ("Tesla V100-SXM2-16GB", ["V100-16GB"]),
        ("Tesla V100-SXM2-32GB", ["V100-32GB"]),
        ("NVIDIA A100-SXM4-80GB", ["A100-80GB"]),
        ("NVIDIA H100 80GB HBM3", ["H100-80GB"]),
        ("NVIDIA A10G", ["A10G"]),
        ("NVIDIA L4", ["L4"]),
        ("NVIDIA L40S", ["L40S"]),
        ("h200-141gb", ["H200-141GB"]),
        ("NVIDIA GeForce RTX 4090", []),
        ("", []),
    ],
)
def test_resolve_gpu(cat: Catalog, device: str, keys: list[str]) -> None:
    assert cat.resolve_gpu(device) == keys


def test_unknown_instance_suggests(cat: Catalog) -> None:
    with pytest.raises(ValueError, match=r"'p3\.16xlarg'.*did you mean 'p3\.16xlarge'"):
        cat.instance("p3.16xlarg")
    with pytest.raises(ValueError, match="p4d.24xlarge"):
        cat.price("p4.24xlarge", "us-east-1", "on-demand")
    assert cat.instance("P3.2XLARGE").name == "p3.2xlarge"


def test_gpu_lookup(cat: Catalog) -> None:
    assert isinstance(cat.gpu("T4"), GpuSpec)
    assert cat.gpu("Tesla T4").key == "T4"  # an unambiguous device name resolves
    with pytest.raises(ValueError, match="gpu = 'V100'.*V100-16GB"):
        cat.gpu("V100")


def test_price_and_offers(cat: Catalog) -> None:
    assert cat.price("p3.16xlarge", "us-east-1", "on-demand") == pytest.approx(24.48)
    assert cat.price("p3.16xlarge", "us-east-1", "spot") == pytest.approx(2.6694)
    assert cat.price("g6.xlarge", "eu-west-1", "on-demand") is None  # not offered there
    with pytest.raises(ValueError, match="market = 'reserved'"):
        cat.price("p3.2xlarge", "us-east-1", "reserved")
    with pytest.raises(ValueError, match="region = 'us-east-9'.*us-east-1"):
        cat.price("p3.2xlarge", "us-east-9")
    offers = cat.offers("us-east-1", ["on-demand", "spot"])
    assert all(isinstance(o, OfferInfo) for o in offers)
    spot = [o for o in offers if o.market == "spot"]
    assert spot and all(o.interruption == "unknown" and o.zone for o in spot)
    assert all(o.interruption == "none" for o in offers if o.market == "on-demand")
    json.dumps([o.to_dict() for o in offers])
    east = cat.instance_types("us-east-1")
    assert all(isinstance(i, InstanceType) and "us-east-1" in i.regions for i in east)
    assert len(cat.instance_types()) > len(east)
    assert cat.quota("p3.2xlarge") is None
    zones = cat.spot_zones("p5.48xlarge", "ap-south-1")
    assert [z["usd_per_hour"] for z in zones] == sorted(z["usd_per_hour"] for z in zones) and len(zones) == 3


def test_to_dict_roundtrip(cat: Catalog, tmp_path: Path) -> None:
    path = tmp_path / "cat.json"
    cat.save(path)
    again = Catalog.load(path)
    assert again.to_dict() == cat.to_dict()
    json.dumps(cat.instance("p4d.24xlarge").to_dict())
    json.dumps(cat.gpu("A10G").to_dict())
    assert not list(tmp_path.glob("*.tmp"))


# ----------------------------------------------------------------------------- load errors

def _write(tmp_path: Path, data: object) -> Path:
    p = tmp_path / "c.json"
    p.write_text(data if isinstance(data, str) else json.dumps(data))
    return p


def test_load_malformed_json(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"not valid JSON \(line 1"):
        Catalog.load(_write(tmp_path, "{bad"))


def test_load_unknown_version(tmp_path: Path, raw: dict) -> None:
    raw["schema"] = "srift.catalog/2"
    with pytest.raises(ValueError, match=r"\$\.schema = 'srift\.catalog/2' is not a supported"):
        Catalog.load(_write(tmp_path, raw))
    del raw["schema"]
    with pytest.raises(ValueError, match=r"\$\.schema is missing"):
        Catalog.load(_write(tmp_path, raw))


def test_load_names_json_path(tmp_path: Path, raw: dict) -> None:
    raw["instances"]["p3.2xlarge"]["gpu_count"] = 0
    with pytest.raises(ValueError, match=r"\$\.instances\['p3\.2xlarge'\]\.gpu_count"):
        Catalog.load(_write(tmp_path, raw))


def test_load_bad_cross_reference(tmp_path: Path, raw: dict) -> None:
    raw["instances"]["p3.2xlarge"]["gpu"] = "V200"
    with pytest.raises(ValueError, match=r"\$\.instances\['p3\.2xlarge'\]\.gpu = 'V200'"):
        Catalog.load(_write(tmp_path, raw))


def test_load_refuses_a_price_where_the_type_is_not_offered(tmp_path: Path, raw: dict) -> None:
    # predict would price it there and the search would not offer it
    raw["instances"]["p3.2xlarge"]["regions"] = ["us-west-2"]
    with pytest.raises(ValueError, match=r"\$\.on_demand\['p3\.2xlarge'\]\['[a-z0-9-]+'\]: p3\.2xlarge is priced "
                                         r"in '[a-z0-9-]+', which is not among \$\.instances\['p3\.2xlarge'\]\.regions"):
        Catalog.load(_write(tmp_path, raw))


def test_overridden_regions_take_their_prices_with_them(cat: Catalog) -> None:
    assert cat.price("p3.2xlarge", "us-east-1") is not None
    ov = cat.with_overrides({"schema": "srift.catalog-overrides/1",
                             "instances": {"p3.2xlarge": {"regions": ["us-west-2"]}}})
    assert ov.instance("p3.2xlarge").regions == ("us-west-2",)
    assert ov.price("p3.2xlarge", "us-east-1") is None
    assert ov.price("p3.2xlarge", "us-west-2") == cat.price("p3.2xlarge", "us-west-2")
    assert ov.price("p3.2xlarge", "us-east-1", "spot") is None
    # a price in the same file puts a region back
    back = cat.with_overrides({"schema": "srift.catalog-overrides/1",
                               "instances": {"p3.2xlarge": {"regions": ["us-west-2"]}},
                               "prices": [{"instance": "p3.2xlarge", "region": "us-east-1", "market": "on-demand",
                                           "usd_per_hour": 2.5}]})
    assert set(back.instance("p3.2xlarge").regions) == {"us-east-1", "us-west-2"}
    assert back.price("p3.2xlarge", "us-east-1") == 2.5


def test_an_instance_gpu_memory_follows_its_overridden_gpu(cat: Catalog) -> None:
    new_gpu = cat.with_overrides({"schema": "srift.catalog-overrides/1",
                                  "instances": {"p3.2xlarge": {"gpu": "V100-32GB"}}})
    assert new_gpu.instance("p3.2xlarge").gpu_memory_gib == 32.0
    more = cat.with_overrides({"schema": "srift.catalog-overrides/1", "gpus": {"V100-16GB": {"memory_gib": 20}}})
    assert {more.instance(n).gpu_memory_gib for n in ("p3.2xlarge", "p3.8xlarge", "p3.16xlarge")} == {20}
    own = cat.with_overrides({"schema": "srift.catalog-overrides/1",
                              "instances": {"p3.2xlarge": {"gpu": "V100-32GB", "gpu_memory_gib": 31.5}}})
    assert own.instance("p3.2xlarge").gpu_memory_gib == 31.5
    assert cat.with_overrides({"schema": "srift.catalog-overrides/1", "gpus": {"T4": {"fp16_tflops": 50.0}}}) \
        .instance("g4dn.xlarge").gpu_memory_gib == cat.instance("g4dn.xlarge").gpu_memory_gib


def test_load_bad_interruption_class(tmp_path: Path, raw: dict) -> None:
    raw["interruption"]["p3.2xlarge"]["us-east-1"] = "often"
    with pytest.raises(ValueError, match=r"\$\.interruption\['p3\.2xlarge'\]\['us-east-1'\]"):
        Catalog.load(_write(tmp_path, raw))


def test_load_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot read"):
        Catalog.load(tmp_path / "nope.json")


# ----------------------------------------------------------------------------- overrides

OVERRIDES_TOML = """
schema = "srift.catalog-overrides/1"

[instances."p3.16xlarge"]
network_gbps = 20.0

[instances."p9.private"]
gpu = "H100-80GB"
gpu_count = 8
vcpus = 192
memory_gib = 2048
interconnect = "nvswitch"
intra_node_gbytes_s = 450
network_gbps = 400
efa = true
network_cards = 4
regions = ["us-east-1"]

[[prices]]
instance = "p3.16xlarge"
region = "us-east-1"
market = "on-demand"
usd_per_hour = 15.0

[[prices]]
instance = "p9.private"
region = "us-east-1"
market = "spot"
usd_per_hour = 30.0

[[interruption]]
instance = "p3.16xlarge"
region = "us-east-1"
class = "5-10%"

[quotas]
"p3.16xlarge" = 4
"""


def test_overrides_toml_file(cat: Catalog, tmp_path: Path) -> None:
    path = tmp_path / "ov.toml"
    path.write_text(OVERRIDES_TOML)
    new = cat.with_overrides(path)
    assert new.instance("p3.16xlarge").network_gbps == 20.0
    assert new.instance("p3.16xlarge").vcpus == 64  # partial entry keeps the rest
    assert new.price("p3.16xlarge", "us-east-1", "on-demand") == 15.0
    assert new.price_info("p3.16xlarge", "us-east-1")["source"].startswith("override")
    assert new.price("p9.private", "us-east-1", "spot") == 30.0
    assert new.instance("p9.private").gpu_memory_gib == cat.gpu("H100-80GB").memory_gib
    assert new.quota("p3.16xlarge") == 4
    assert new.interruption_class("p3.16xlarge", "us-east-1") == "5-10%"
    # the original is untouched (catalogs are immutable)
    assert cat.price("p3.16xlarge", "us-east-1", "on-demand") == pytest.approx(24.48)
    assert cat.quota("p3.16xlarge") is None


def test_overrides_json_file(cat: Catalog, tmp_path: Path) -> None:
    path = tmp_path / "ov.json"
    path.write_text(json.dumps({"schema": "srift.catalog-overrides/1", "gpus": {"T4": {"fp16_tflops": 50.0}}}))
    assert cat.with_overrides(path).gpu("T4").fp16_tflops == 50.0
    assert cat.gpu("T4").fp16_tflops == 65.0


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"schema": "srift.catalog-overrides/9"}, r"\$\.schema = 'srift\.catalog-overrides/9'"),
        ({"schema": "srift.catalog-overrides/1", "extras": {}}, r"\$\.extras: unknown section"),
        ({"schema": "srift.catalog-overrides/1", "instances": {"p3.2xlarge": {"network_gbps": -5}}},
         r"\$\.instances\['p3\.2xlarge'\]\.network_gbps = -5: must be a number > 0"),
        ({"schema": "srift.catalog-overrides/1", "instances": {"p3.2xlarge": {"nic": 5}}},
         r"unknown field 'nic'"),
        ({"schema": "srift.catalog-overrides/1", "instances": {"p3.2xlarge": {"gpu": "V200"}}},
         r"\.gpu = 'V200': not a GPU key"),
        ({"schema": "srift.catalog-overrides/1", "instances": {"x9.big": {"gpu": "T4"}}},
         r"new instance type needs fields \['gpu_count'"),
        ({"schema": "srift.catalog-overrides/1",
          "prices": [{"instance": "p3.2xlarge", "region": "us-east-1", "market": "reserved", "usd_per_hour": 1}]},
         r"\$\.prices\[0\]\.market = 'reserved'"),
        ({"schema": "srift.catalog-overrides/1",
          "prices": [{"instance": "p3.2xlarge", "region": "us-east-1", "market": "spot", "usd_per_hour": "cheap"}]},
         r"usd_per_hour = 'cheap'"),
        ({"schema": "srift.catalog-overrides/1",
          "prices": [{"instance": "nope.big", "region": "us-east-1", "market": "spot", "usd_per_hour": 1}]},
         r"\$\.prices\[0\]\.instance = 'nope\.big'"),
        ({"schema": "srift.catalog-overrides/1", "quotas": {"p3.2xlarge": -1}}, r"quotas\['p3\.2xlarge'\] = -1"),
        ({"schema": "srift.catalog-overrides/1", "quotas": {"p3.2xlarge": 2.5}}, r"must be an integer >= 0"),
        ({"schema": "srift.catalog-overrides/1", "gpus": {"T4": {"launch_year": "2018"}}},
         r"\$\.gpus\.T4\.launch_year = '2018': must be a whole year in 1990-2100 or null"),
        ({"schema": "srift.catalog-overrides/1", "gpus": {"T4": {"launch_year": 18}}}, r"launch_year = 18"),
        ({"schema": "srift.catalog-overrides/1", "instances": {"p3.2xlarge": {"measured_network_over": "lo"}}},
         r"\$\.instances\['p3\.2xlarge'\]\.measured_network_over = 'lo': must be what the measured network link "
         r"crossed: 'nic' or 'loopback'"),
    ],
)
def test_overrides_errors(cat: Catalog, overrides: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        cat.with_overrides(overrides)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        # an instance named by a list or an object: a TypeError (unhashable) from the set lookup
        ({"schema": "srift.catalog-overrides/1",
          "prices": [{"instance": [], "region": "us-east-1", "market": "spot", "usd_per_hour": 1}]},
         r"^catalog overrides: \$\.prices\[0\]\.instance = \[\]: must be an instance type"),
        ({"schema": "srift.catalog-overrides/1",
          "interruption": [{"instance": {"p3.2xlarge": 1}, "region": "us-east-1", "class": "<5%"}]},
         r"^catalog overrides: \$\.interruption\[0\]\.instance = \{'p3\.2xlarge': 1\}: must be an instance type"),
        ({"schema": "srift.catalog-overrides/1", "quotas": {"p3.2xlarge": 1},
          "prices": [{"instance": "p3.2xlarge", "region": ["us-east-1"], "market": ["spot"], "usd_per_hour": 1}]},
         r"\$\.prices\[0\]\.region = \['us-east-1'\]: must be a region code"),
        # a section of the wrong type that is empty or 0 was read as no section
        ({"schema": "srift.catalog-overrides/1", "prices": {}}, r"^catalog overrides: \$\.prices = \{\}: must be a list"),
        ({"schema": "srift.catalog-overrides/1", "prices": 0}, r"\$\.prices = 0: must be a list"),
        ({"schema": "srift.catalog-overrides/1", "interruption": {}}, r"\$\.interruption = \{\}: must be a list"),
        ({"schema": "srift.catalog-overrides/1", "quotas": []}, r"\$\.quotas = \[\]: must be a table"),
        ({"schema": "srift.catalog-overrides/1", "quotas": 0}, r"\$\.quotas = 0: must be a table"),
        ({"schema": "srift.catalog-overrides/1", "gpus": 0}, r"\$\.gpus = 0: must be a table"),
        ({"schema": "srift.catalog-overrides/1", "instances": ""}, r"\$\.instances = '': must be a table"),
    ],
)
def test_overrides_of_the_wrong_type_are_named_not_crashed_on(cat: Catalog, overrides: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        cat.with_overrides(overrides)
    # None is an absent section, as before
    assert cat.with_overrides({"schema": "srift.catalog-overrides/1", "prices": None, "quotas": None}).price(
        "p3.2xlarge", "us-east-1") == cat.price("p3.2xlarge", "us-east-1")


def test_overrides_bad_toml(cat: Catalog, tmp_path: Path) -> None:
    path = tmp_path / "ov.toml"
    path.write_text("schema = \n")
    with pytest.raises(ValueError, match="not valid TOML"):
        cat.with_overrides(path)


_P3 = r"\$\.instances\['p3\.2xlarge'\]"


@pytest.mark.parametrize(
    ("section", "message"),
    [
        # 1e300 GiB is an infinite number of bytes: the engine's batch arithmetic overflowed
        ('[gpus."V100-16GB"]\nmemory_gib = 1e300', r"\$\.gpus\['V100-16GB'\]\.memory_gib = 1e\+300: .*at most"),
        ('[instances."p3.2xlarge"]\nmemory_gib = 1e300', _P3 + r"\.memory_gib = 1e\+300"),
        ('[instances."p3.2xlarge"]\nnetwork_gbps = ' + "9" * 400, _P3 + r"\.network_gbps = 9999"),  # past a double
        ('[instances."p3.2xlarge"]\ngpu_count = 1000000', _P3 + r"\.gpu_count = 1000000: .*at most 10000"),
        ('[instances."p3.2xlarge"]\nmeasured_network_latency_us = inf', _P3 + r"\.measured_network_latency_us = inf"),
        ('[instances."p3.2xlarge"]\nmeasured_intra_latency_us = nan', _P3 + r"\.measured_intra_latency_us = nan"),
        # a free offer: predict would cost it at $0, recommend's search refuses it
        ('[[prices]]\ninstance = "p3.2xlarge"\nregion = "us-east-1"\nmarket = "on-demand"\nusd_per_hour = 0',
         r"\$\.prices\[0\]\.usd_per_hour = 0: must be a number > 0"),
        ('[[prices]]\ninstance = "p3.2xlarge"\nregion = "us-east-1"\nmarket = "spot"\nusd_per_hour = 1e300',
         r"\$\.prices\[0\]\.usd_per_hour = 1e\+300: .*at most"),
        # rates near 0 made every time infinite ("seconds[0] must be finite and > 0, got inf")
        ('[gpus.A10G]\nmemory_bandwidth_gbytes_s = 1e-300',
         r"\$\.gpus\.A10G\.memory_bandwidth_gbytes_s = 1e-300: .*at least 0\.1"),
        ('[gpus.A10G]\nfp32_tflops = 1e-300', r"\$\.gpus\.A10G\.fp32_tflops = 1e-300: .*at least 0\.001"),
    ],
    ids=["gpu-memory", "instance-memory", "past-a-double", "gpu-count", "inf", "nan", "free", "price",
         "bandwidth-near-0", "tflops-near-0"],
)
def test_overrides_refuse_absurd_numbers(cat: Catalog, tmp_path: Path, section: str, message: str) -> None:
    path = tmp_path / "ov.toml"
    path.write_text(f'schema = "srift.catalog-overrides/1"\n{section}\n')
    with pytest.raises(ValueError, match=r"catalog overrides .*ov\.toml: " + message):
        cat.with_overrides(path)


def test_catalog_file_refuses_absurd_numbers_and_free_prices(tmp_path: Path, raw: dict) -> None:
    """The overrides take their limits from the catalog schema: a whole catalog file meets the same."""
    raw["gpus"]["T4"]["memory_gib"] = 1e300
    with pytest.raises(ValueError, match=r"\$\.gpus\.T4\.memory_gib: 1e\+300 is greater than the maximum"):
        Catalog.load(_write(tmp_path, raw))
    raw["gpus"]["T4"]["memory_gib"] = 16
    raw["on_demand"]["p3.2xlarge"]["us-east-1"]["usd_per_hour"] = 0
    with pytest.raises(ValueError, match=r"\$\.on_demand\['p3\.2xlarge'\]\['us-east-1'\]\.usd_per_hour: 0"):
        Catalog.load(_write(tmp_path, raw))


@pytest.mark.parametrize(("suffix", "text"), [
    (".json", '{"schema": "srift.catalog-overrides/1", "note": ' + "[" * 100_000 + "]" * 100_000 + "}"),
    (".toml", 'schema = "srift.catalog-overrides/1"\nnote = ' + "[" * 100_000 + "]" * 100_000 + "\n"),
])
def test_overrides_nested_too_deeply(cat: Catalog, tmp_path: Path, suffix: str, text: str) -> None:
    path = tmp_path / f"deep{suffix}"
    path.write_text(text)
    with pytest.raises(ValueError, match=rf"catalog overrides .*deep\{suffix}: .*nested too deeply"):
        cat.with_overrides(path)
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(ValueError, match="nested too deeply"):
        cat.with_overrides({"schema": "srift.catalog-overrides/1", "note": deep})


# ----------------------------------------------------------------------------- generator

def _load_builder():
    spec = importlib.util.spec_from_file_location("build_catalog", REPO / "scripts" / "build_catalog.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


@pytest.mark.skipif(not (SHARED_DATA / "ec2").is_dir(), reason="shared EC2 facts not present")
def test_bundled_snapshot_is_generated(raw: dict) -> None:
    """The shipped catalog.json is exactly what the script makes (nobody hand-edits it)."""
    built, report = _load_builder().build(SHARED_DATA, raw["generated_at"])
    assert json.loads(json.dumps(built)) == raw
    assert report["counts"]["instance_types"] == len(raw["instances"])


def test_curated_csvs_cite_sources() -> None:
    import csv

    for name in ("gpu_specs.csv", "instance_facts.csv"):
        with (REPO / "srift" / "data" / name).open() as fh:
            rows = list(csv.DictReader(fh))
        assert rows
        for row in rows:
            assert row["source_url"].startswith("https://"), (name, row)


def test_a_catalog_nested_too_deeply_is_a_value_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match="nested too deeply to be a catalog"):
        Catalog.load(path)


def test_overrides_set_a_launch_year(cat: Catalog) -> None:
    """A GPU's launch year places it inside or past the learned models' data (srift.learn.
    data_edge note "data edge"); an override may set or clear it."""
    assert cat.gpu("T4").launch_year == 2018
    assert cat.with_overrides({"schema": "srift.catalog-overrides/1",
                               "gpus": {"T4": {"launch_year": 2030}}}).gpu("T4").launch_year == 2030
    assert cat.with_overrides({"schema": "srift.catalog-overrides/1",
                               "gpus": {"T4": {"launch_year": None}}}).gpu("T4").launch_year is None


def test_a_file_that_says_a_field_twice_is_refused(cat: Catalog, tmp_path: Path) -> None:
    """json.loads keeps the last of a repeated key silently: an override that set the network
    twice (1.2, then 0.01 GB/s) predicted an 18 s iteration (a review)."""
    f = tmp_path / "dup.json"
    f.write_text('{"schema": "srift.catalog-overrides/1", "instances": {"p3.2xlarge": '
                 '{"measured_network_gbytes_s": 1.2, "measured_network_gbytes_s": 0.01}}}')
    with pytest.raises(ValueError, match="'measured_network_gbytes_s' appears twice"):
        cat.with_overrides(f)
    g = tmp_path / "cat.json"
    g.write_text('{"schema": "srift.catalog/1", "schema": "srift.catalog/1"}')
    with pytest.raises(ValueError, match="'schema' appears twice"):
        Catalog.load(g)


def test_a_measured_network_link_says_what_it_crossed(cat: Catalog, tmp_path: Path) -> None:
    """`srift probe-network --loopback` stored a loopback figure as the NIC's with nothing in the
    record saying so (a review): `measured_network_over` ("nic", "loopback", absent: not said)
    travels from the overrides to the instance type and through a saved catalog; a later file
    that sets a new figure without it does not inherit the earlier one's provenance."""
    lo = {"schema": "srift.catalog-overrides/1", "instances": {"p3.2xlarge": {
        "measured_network_gbytes_s": 3.0, "measured_network_over": "loopback"}}}
    probed = cat.with_overrides(lo)
    assert probed.instance("p3.2xlarge").measured_network_over == "loopback"
    assert cat.instance("p3.2xlarge").measured_network_over is None
    probed.save(tmp_path / "c.json")
    assert Catalog.load(tmp_path / "c.json").instance("p3.2xlarge").measured_network_over == "loopback"
    later = probed.with_overrides({"schema": "srift.catalog-overrides/1", "instances": {"p3.2xlarge": {
        "measured_network_gbytes_s": 1.0}}})
    assert later.instance("p3.2xlarge").measured_network_over is None
    assert probed.with_overrides({"schema": "srift.catalog-overrides/1", "instances": {"p3.2xlarge": {
        "measured_network_latency_us": 40}}}).instance("p3.2xlarge").measured_network_over == "loopback"
