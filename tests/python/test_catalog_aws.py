"""Live catalog refresh through boto3, against moto's server (EC2 types/offerings) and botocore's
Stubber (Pricing GetProducts, spot history) in the shapes AWS documents; plus faults.

Everything talks to 127.0.0.1 only, with fake credentials from the environment.
"""
from __future__ import annotations

import argparse
import datetime as dt
import http.server
import json
import os
import socket
import threading
import urllib.request
from pathlib import Path
from typing import Any

import pytest

boto3 = pytest.importorskip("boto3")
from botocore.stub import Stubber  # noqa: E402

from srift.catalog import Catalog  # noqa: E402
from srift.catalog_aws import (  # noqa: E402
    SRC_LIVE_PRICING,
    AwsAccessDeniedError,
    AwsClients,
    AwsThrottledError,
    StaleCatalogWarning,
    cache_dir,
    fetch_instance_types,
    fetch_offerings,
    fetch_spot_prices,
    parse_price_document,
    pricing_filters,
    refresh,
    refresh_catalog,
)

NOW = dt.datetime(2026, 11, 20, 12, 0, 0, tzinfo=dt.timezone.utc)
FETCHED = "2026-11-20T12:00:00Z"


@pytest.fixture(autouse=True)
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Fake credentials, no profiles or instance metadata, and a private cache dir."""
    for var in list(os.environ):
        if var.startswith("AWS_ENDPOINT_URL") or var in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
            monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    cache = tmp_path / "cache"
    monkeypatch.setenv("SRIFT_CACHE_DIR", str(cache))
    return cache


@pytest.fixture(scope="module")
def moto_url() -> Any:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    assert host == "127.0.0.1"
    yield f"http://127.0.0.1:{port}"
    server.stop()


def closed_port_url() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens here now: connection refused
    return f"http://127.0.0.1:{port}"


# ----------------------------------------------------------------------------- AWS-shaped responses

def price_document(sku: str, instance: str, region: str, usd: str) -> str:
    """One PriceList entry exactly as GetProducts returns it: a JSON document inside a string."""
    offer = f"{sku}.JRTCKXETXF"
    return json.dumps({
        "product": {
            "productFamily": "Compute Instance",
            "attributes": {
                "instanceType": instance, "regionCode": region, "operatingSystem": "Linux",
                "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used",
                "servicecode": "AmazonEC2", "usagetype": f"BoxUsage:{instance}",
            },
            "sku": sku,
        },
        "serviceCode": "AmazonEC2",
        "terms": {"OnDemand": {offer: {
            "priceDimensions": {f"{offer}.6YS6EN2CT7": {
                "unit": "Hrs", "endRange": "Inf", "description": f"${usd} per On Demand Linux {instance} Instance Hour",
                "appliesTo": [], "rateCode": f"{offer}.6YS6EN2CT7", "beginRange": "0",
                "pricePerUnit": {"USD": usd},
            }},
            "sku": sku, "effectiveDate": "2026-11-01T00:00:00Z", "offerTermCode": "JRTCKXETXF", "termAttributes": {},
        }}},
        "version": "20261101000000", "publicationDate": "2026-11-01T00:00:00Z",
    })


def products_response(*docs: str) -> dict[str, Any]:
    return {"FormatVersion": "aws_v1", "PriceList": list(docs)}


def spot_entry(instance: str, zone: str, price: str, when: dt.datetime = NOW) -> dict[str, Any]:
    return {"AvailabilityZone": zone, "InstanceType": instance, "ProductDescription": "Linux/UNIX",
            "SpotPrice": price, "Timestamp": when}


def instance_type_entry(name: str, gpu: str, count: int, mem_mib: int, gbps: float, manufacturer: str = "NVIDIA") -> dict:
    """A DescribeInstanceTypes entry with the fields srift reads, in AWS's shape."""
    return {
        "InstanceType": name, "CurrentGeneration": True, "SupportedUsageClasses": ["on-demand", "spot"],
        "VCpuInfo": {"DefaultVCpus": 8}, "MemoryInfo": {"SizeInMiB": 32768},
        "NetworkInfo": {"NetworkPerformance": f"{gbps:g} Gigabit", "MaximumNetworkCards": 1, "EfaSupported": False,
                        "NetworkCards": [{"NetworkCardIndex": 0, "NetworkPerformance": f"{gbps:g} Gigabit",
                                          "BaselineBandwidthInGbps": gbps, "PeakBandwidthInGbps": gbps}]},
        "GpuInfo": {"Gpus": [{"Name": gpu, "Manufacturer": manufacturer, "Count": count,
                              "MemoryInfo": {"SizeInMiB": mem_mib}}], "TotalGpuMemoryInMiB": mem_mib * count},
    }


class Clients(AwsClients):
    """EC2 facts from one endpoint (moto), spot and pricing from Stubber-backed clients."""

    def __init__(self, endpoint_url: str | None, spot_client: Any = None, pricing_client: Any = None,
                 ec2_client: Any = None, max_attempts: int = 2) -> None:
        super().__init__(endpoint_url=endpoint_url, max_attempts=max_attempts)
        self._spot, self._pricing, self._ec2 = spot_client, pricing_client, ec2_client

    def ec2(self, region: str) -> Any:
        return self._ec2 if self._ec2 is not None else super().ec2(region)

    def spot(self, region: str) -> Any:
        return self._spot if self._spot is not None else super().spot(region)

    def pricing(self) -> Any:
        return self._pricing if self._pricing is not None else super().pricing()


def stubbed(service: str) -> tuple[Any, Stubber]:
    client = boto3.client(service, region_name="us-east-1")
    stub = Stubber(client)
    stub.activate()
    return client, stub


def expect_spot(stub: Stubber, names: list[str], entries: list[dict]) -> None:
    stub.add_response("describe_spot_price_history", {"SpotPriceHistory": entries, "NextToken": ""},
                      {"InstanceTypes": names, "ProductDescriptions": ["Linux/UNIX"], "StartTime": NOW})


def expect_price(stub: Stubber, name: str, region: str, *docs: str) -> None:
    stub.add_response("get_products", products_response(*docs),
                      {"ServiceCode": "AmazonEC2", "Filters": pricing_filters(name, region), "FormatVersion": "aws_v1"})


def stub_ec2_flow(types: list[dict], region: str = "us-east-1") -> tuple[Any, Stubber]:
    client, stub = stubbed("ec2")
    names = sorted(t["InstanceType"] for t in types)
    stub.add_response("describe_instance_types", {"InstanceTypes": types},
                      {"Filters": [{"Name": "instance-type", "Values": names}]})
    stub.add_response("describe_instance_type_offerings", {"InstanceTypeOfferings": [
        {"InstanceType": n, "LocationType": "region", "Location": region} for n in names]},
        {"LocationType": "region", "Filters": [{"Name": "location", "Values": [region]}]})
    return client, stub


# ----------------------------------------------------------------------------- moto: real HTTP

def test_instance_types_and_offerings_from_moto(moto_url: str) -> None:
    clients = AwsClients(endpoint_url=moto_url, max_attempts=2)
    types = fetch_instance_types(clients.ec2("us-east-1"))
    assert types["p4d.24xlarge"]["gpu_count"] == 8
    assert types["p4d.24xlarge"]["gpu_name"] == "A100"
    assert types["p4d.24xlarge"]["network_baseline_gbps"] == 400.0 and types["p4d.24xlarge"]["efa"]
    assert types["g4dn.xlarge"]["network_baseline_gbps"] == 5.0
    assert "g4ad.xlarge" not in types          # AMD GPU
    assert "g6f.large" not in types            # fractional NVIDIA slice
    assert "inf2.xlarge" not in types
    offered = fetch_offerings(clients.ec2("us-east-1"), "us-east-1")
    assert {"p4d.24xlarge", "g4dn.xlarge", "p5.48xlarge"} <= offered
    assert "p5.48xlarge" not in fetch_offerings(clients.ec2("eu-west-3"), "eu-west-3")


def test_refresh_end_to_end(moto_url: str, aws_env: Path) -> None:
    spot_client, spot_stub = stubbed("ec2")
    pricing_client, pricing_stub = stubbed("pricing")
    offered = ["g4dn.xlarge", "p4d.24xlarge"]
    expect_spot(spot_stub, offered, [
        spot_entry("p4d.24xlarge", "us-east-1a", "9.876500"),
        spot_entry("p4d.24xlarge", "us-east-1b", "8.500000"),
        spot_entry("p4d.24xlarge", "us-east-1b", "99.0", NOW - dt.timedelta(hours=3)),  # older: ignored
        spot_entry("g4dn.xlarge", "us-east-1c", "0.160000"),
    ])
    expect_price(pricing_stub, "g4dn.xlarge", "us-east-1", price_document("SKUG4DN", "g4dn.xlarge", "us-east-1", "0.5260000000"))
    expect_price(pricing_stub, "p4d.24xlarge", "us-east-1", price_document("SKUP4D", "p4d.24xlarge", "us-east-1", "21.9576000000"))
    clients = Clients(moto_url, spot_client, pricing_client)
    base = Catalog.default()

    cat, report = refresh(["us-east-1"], clients=clients, progress=False, now=NOW, workers=1,
                          instance_types=["p4d.24xlarge", "g4dn.xlarge", "p3.2xlarge", "g4ad.xlarge"])
    spot_stub.assert_no_pending_responses()
    pricing_stub.assert_no_pending_responses()

    assert cat.price("p4d.24xlarge", "us-east-1", "on-demand") == pytest.approx(21.9576)
    assert cat.price_info("p4d.24xlarge", "us-east-1") == {"usd_per_hour": 21.9576, "as_of": FETCHED, "source": SRC_LIVE_PRICING}
    spot = cat.price_info("p4d.24xlarge", "us-east-1", "spot")
    assert (spot["usd_per_hour"], spot["zone"], spot["as_of"]) == (8.5, "us-east-1b", FETCHED)
    assert [z["zone"] for z in cat.spot_zones("p4d.24xlarge", "us-east-1")] == ["us-east-1b", "us-east-1a"]
    # Other regions keep the snapshot's prices, with the snapshot's date.
    assert cat.price_info("p4d.24xlarge", "eu-west-1") == base.price_info("p4d.24xlarge", "eu-west-1")
    # Moto does not list p3.2xlarge in us-east-1: it is not offered there now, so it loses the
    # region and its prices there, and keeps every region nobody refreshed (note "live-merge").
    assert "us-east-1" not in cat.instance("p3.2xlarge").regions
    assert set(cat.instance("p3.2xlarge").regions) == set(base.instance("p3.2xlarge").regions) - {"us-east-1"}
    assert cat.instance("p3.2xlarge").status == "current"
    assert cat.price("p3.2xlarge", "us-east-1") is None and cat.price("p3.2xlarge", "us-east-1", "spot") is None
    assert cat.price("p3.2xlarge", "eu-west-1") == base.price("p3.2xlarge", "eu-west-1")
    assert "p3.2xlarge" not in {o.instance for o in cat.offers("us-east-1")}
    assert "p3.2xlarge" in {o.instance for o in cat.offers("eu-west-1")}
    assert report.withdrawn == ["p3.2xlarge@us-east-1"] and report.unlisted == []
    # Types outside the refresh's scope are untouched.
    assert cat.instance("p5.48xlarge").status == "current"
    assert cat.refreshed_at == FETCHED
    assert (report.on_demand_prices, report.spot_rows) == (2, 3)
    # Cached with timestamps, atomically.
    region_cache = json.loads((aws_env / "aws" / "us-east-1.json").read_text())
    assert region_cache["fetched_at"] == FETCHED and region_cache["offered"] == offered
    assert Catalog.load(aws_env / "catalog.json").to_dict() == cat.to_dict()
    assert not list(aws_env.rglob("*.tmp"))

    # A second call within max_age reads the cache and makes no AWS call at all.
    class NoCalls(AwsClients):
        def ec2(self, region: str) -> Any:
            raise AssertionError("AWS called despite a fresh cache")

        pricing = spot = ec2  # type: ignore[assignment]

    again, rep2 = refresh(["us-east-1"], clients=NoCalls(), progress=False, now=NOW + dt.timedelta(hours=1),
                          instance_types=["p4d.24xlarge", "g4dn.xlarge", "p3.2xlarge"])
    assert rep2.from_cache == ["us-east-1"]
    assert again.price("p4d.24xlarge", "us-east-1") == pytest.approx(21.9576)


G5_XLARGE_FIELDS = {"gpu_name": "A10G", "gpu_memory_gib": 22.354, "gpu_count": 1, "vcpus": 4, "memory_gib": 16.0,
                    "network_performance": "Up to 10 Gigabit", "network_baseline_gbps": 2.5,
                    "network_peak_gbps": 10.0, "network_cards": 1, "efa": False, "max_efa_interfaces": None}


def test_from_aws_classmethod_uses_cache(moto_url: str, aws_env: Path) -> None:
    """Catalog.from_aws delegates to the refresh (here: a cached region, so no AWS call)."""
    (aws_env / "aws").mkdir(parents=True)
    (aws_env / "aws" / "us-west-2.json").write_text(json.dumps({
        "region": "us-west-2", "fetched_at": dt.datetime.now(dt.timezone.utc).isoformat(),
        "scope": {"instance_types": ["g5.xlarge"], "type_patterns": None, "spot": True, "on_demand": True},
        "instance_types": {"g5.xlarge": G5_XLARGE_FIELDS}, "offered": ["g5.xlarge"], "spot_zones": {},
        "on_demand": {"g5.xlarge": {"us-west-2": {"usd_per_hour": 0.9, "as_of": "2026-11-20T00:00:00Z", "source": SRC_LIVE_PRICING}}},
    }))
    cat = Catalog.from_aws(regions=["us-west-2"], progress=False, instance_types=["g5.xlarge"])
    assert cat.price("g5.xlarge", "us-west-2") == 0.9
    # It quoted no spot price there: the old one goes (DescribeSpotPriceHistory quotes every AZ that sells it).
    assert cat.price("g5.xlarge", "us-west-2", "spot") is None
    assert cat.price("g5.xlarge", "us-east-1") == Catalog.default().price("g5.xlarge", "us-east-1")


# ----------------------------------------------------------------------------- pagination, shapes

def test_paginators_follow_next_token() -> None:
    client, stub = stubbed("ec2")
    a = instance_type_entry("g4dn.xlarge", "T4", 1, 16384, 5.0)
    b = instance_type_entry("g5.xlarge", "A10G", 1, 22888, 2.5)
    amd = instance_type_entry("g4ad.xlarge", "Radeon Pro V520", 1, 8192, 2.5, manufacturer="AMD")
    flt = [{"Name": "instance-type", "Values": ["g*", "p*"]}]
    stub.add_response("describe_instance_types", {"InstanceTypes": [a, amd], "NextToken": "page2"}, {"Filters": flt})
    stub.add_response("describe_instance_types", {"InstanceTypes": [b]}, {"Filters": flt, "NextToken": "page2"})
    loc = [{"Name": "location", "Values": ["us-east-1"]}]
    stub.add_response("describe_instance_type_offerings", {"InstanceTypeOfferings": [
        {"InstanceType": "g4dn.xlarge", "LocationType": "region", "Location": "us-east-1"}], "NextToken": "t2"},
        {"LocationType": "region", "Filters": loc})
    stub.add_response("describe_instance_type_offerings", {"InstanceTypeOfferings": [
        {"InstanceType": "g5.xlarge", "LocationType": "region", "Location": "us-east-1"}]},
        {"LocationType": "region", "Filters": loc, "NextToken": "t2"})
    types = fetch_instance_types(client)
    assert sorted(types) == ["g4dn.xlarge", "g5.xlarge"]
    assert types["g5.xlarge"]["gpu_memory_gib"] == pytest.approx(22.352, abs=1e-3)
    assert fetch_offerings(client, "us-east-1") == {"g4dn.xlarge", "g5.xlarge"}
    stub.assert_no_pending_responses()


def test_parse_price_document_shapes() -> None:
    assert parse_price_document(price_document("ABC", "p3.2xlarge", "us-east-1", "3.0600000000")) == ("ABC", 3.06)
    with pytest.raises(ValueError, match="SKU 'BROKEN1'"):
        parse_price_document(json.dumps({"product": {"sku": "BROKEN1"}, "terms": {}}))
    with pytest.raises(ValueError, match="SKU 'TRUNC9'"):
        parse_price_document('{"product": {"sku": "TRUNC9", "attributes": {')
    bad_usd = json.loads(price_document("NOTNUM", "p3.2xlarge", "us-east-1", "x"))
    with pytest.raises(ValueError, match="SKU 'NOTNUM'"):
        parse_price_document(json.dumps(bad_usd))


# ----------------------------------------------------------------------------- faults

G4 = instance_type_entry("g4dn.xlarge", "T4", 1, 16384, 5.0)


def test_malformed_price_document_is_skipped_with_warning() -> None:
    ec2, _ = stub_ec2_flow([G4])
    spot_client, spot_stub = stubbed("ec2")
    expect_spot(spot_stub, ["g4dn.xlarge"], [spot_entry("g4dn.xlarge", "us-east-1a", "0.2")])
    pricing_client, pricing_stub = stubbed("pricing")
    expect_price(pricing_stub, "g4dn.xlarge", "us-east-1",
                 json.dumps({"product": {"sku": "MALFORMEDSKU"}, "terms": {"OnDemand": {"x": {}}}}),
                 price_document("GOODSKU", "g4dn.xlarge", "us-east-1", "0.5260000000"))
    with pytest.warns(RuntimeWarning, match="MALFORMEDSKU"):
        cat, report = refresh(["us-east-1"], clients=Clients(None, spot_client, pricing_client, ec2_client=ec2),
                              cache=False, progress=False, now=NOW, workers=1, instance_types=["g4dn.xlarge"])
    assert cat.price("g4dn.xlarge", "us-east-1") == pytest.approx(0.526)
    assert any("MALFORMEDSKU" in w for w in report.warnings)


def test_spot_price_that_is_no_price_is_skipped_with_warning() -> None:
    """The catalog schema refuses a price that is not > 0: one such row must not sink the refresh."""
    client, stub = stubbed("ec2")
    expect_spot(stub, ["g4dn.xlarge"], [spot_entry("g4dn.xlarge", "us-east-1a", "0.000000"),
                                        spot_entry("g4dn.xlarge", "us-east-1b", "nan"),
                                        spot_entry("g4dn.xlarge", "us-east-1c", "0.2")])
    warnings: list[str] = []
    prices = fetch_spot_prices(client, ["g4dn.xlarge"], NOW, warn=warnings.append)
    assert [z["zone"] for z in prices["g4dn.xlarge"]] == ["us-east-1c"]
    assert len(warnings) == 2 and all("not a price > 0" in w for w in warnings)


def test_access_denied_names_iam_action() -> None:
    ec2, _ = stub_ec2_flow([G4])
    spot_client, spot_stub = stubbed("ec2")
    expect_spot(spot_stub, ["g4dn.xlarge"], [])
    pricing_client, pricing_stub = stubbed("pricing")
    pricing_stub.add_client_error(
        "get_products", service_error_code="AccessDeniedException", http_status_code=400,
        service_message="User: arn:aws:iam::123456789012:user/dev is not authorized to perform: pricing:GetProducts")
    with pytest.raises(AwsAccessDeniedError, match=r"denied pricing:GetProducts .*IAM action 'pricing:GetProducts'"):
        refresh(["us-east-1"], clients=Clients(None, spot_client, pricing_client, ec2_client=ec2),
                cache=False, progress=False, now=NOW, workers=1, instance_types=["g4dn.xlarge"])


def test_access_denied_on_ec2() -> None:
    ec2, stub = stubbed("ec2")
    stub.add_client_error("describe_instance_types", service_error_code="UnauthorizedOperation",
                          service_message="You are not authorized to perform this operation.", http_status_code=403)
    with pytest.raises(AwsAccessDeniedError, match="ec2:DescribeInstanceTypes"):
        refresh(["us-east-1"], clients=Clients(None, ec2_client=ec2), cache=False, progress=False, now=NOW)


class ThrottlingProxy:
    """127.0.0.1 HTTP endpoint: the first ``throttle`` requests get EC2's RequestLimitExceeded,
    later ones are forwarded to moto. Counts requests."""

    def __init__(self, upstream: str, throttle: int) -> None:
        self.hits = 0
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                proxy.hits += 1
                if proxy.hits <= throttle:
                    err = (b'<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error>'
                           b"<Code>RequestLimitExceeded</Code><Message>Request limit exceeded.</Message>"
                           b"</Error></Errors><RequestID>0b6c4f3e-1111</RequestID></Response>")
                    self.send_response(503)
                    self.send_header("Content-Length", str(len(err)))
                    self.end_headers()
                    self.wfile.write(err)
                    return
                req = urllib.request.Request(upstream + self.path, data=body, method="POST",
                                             headers={k: v for k, v in self.headers.items() if k.lower() != "host"})
                with urllib.request.urlopen(req, timeout=30) as resp:  # loopback moto only
                    data = resp.read()
                    self.send_response(resp.status)
                    self.send_header("Content-Length", str(len(data)))
                    self.send_header("Content-Type", resp.headers.get("Content-Type", "text/xml"))
                    self.end_headers()
                    self.wfile.write(data)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> ThrottlingProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_throttling_retried_then_clear_error(moto_url: str) -> None:
    with ThrottlingProxy(moto_url, throttle=10**6) as proxy:
        clients = AwsClients(endpoint_url=proxy.url, max_attempts=3)
        with pytest.raises(AwsThrottledError, match=r"throttled ec2:DescribeInstanceTypes in us-east-1 .*3 attempts"):
            refresh(["us-east-1"], clients=clients, cache=False, progress=False, now=NOW)
        assert proxy.hits == 3  # adaptive mode retried, then gave up


def test_throttling_retried_then_succeeds(moto_url: str) -> None:
    with ThrottlingProxy(moto_url, throttle=1) as proxy:
        types = fetch_instance_types(AwsClients(endpoint_url=proxy.url, max_attempts=3).ec2("us-east-1"),
                                     instance_types=["p4d.24xlarge"])
        assert list(types) == ["p4d.24xlarge"] and proxy.hits == 2


def test_unreachable_endpoint_falls_back_to_snapshot() -> None:
    url = closed_port_url()
    # The age given is the prices' (2026-01-21), not the file's: a snapshot generated yesterday
    # can hold prices from months ago.
    with pytest.warns(StaleCatalogWarning, match=r"unreachable.*bundled snapshot generated \S+ \(on-demand prices "
                                                 r"dated 2026-01-21, the oldest \d+ days old; 82 spot prices undated\)"):
        cat = refresh_catalog(["us-east-1"], progress=False, endpoint_url=url, max_attempts=2)
    assert cat.to_dict() == Catalog.default().to_dict()


def test_unreachable_prefers_cached_refresh(aws_env: Path) -> None:
    newer = Catalog.default().to_dict()
    newer["refreshed_at"] = "2026-11-19T00:00:00Z"
    Catalog(newer).save(aws_env / "catalog.json")
    with pytest.warns(StaleCatalogWarning, match="cached refresh"):
        cat = refresh_catalog(["us-east-1"], progress=False, endpoint_url=closed_port_url(), max_attempts=1)
    assert cat.refreshed_at == "2026-11-19T00:00:00Z"
    with pytest.raises(ConnectionError, match="unreachable"):
        refresh(["us-east-1"], progress=False, endpoint_url=closed_port_url(), max_attempts=1, fallback=False)


def test_unreachable_falls_back_to_the_catalog_given_not_the_cache(aws_env: Path) -> None:
    # the cached refresh used to replace a --catalog / --catalog-overrides the user gave
    newer = Catalog.default().to_dict()
    newer["refreshed_at"] = "2026-11-19T00:00:00Z"
    Catalog(newer).save(aws_env / "catalog.json")
    mine = Catalog.default().with_overrides({"schema": "srift.catalog-overrides/1", "prices": [
        {"instance": "p3.2xlarge", "region": "us-east-1", "market": "on-demand", "usd_per_hour": 1.0}]})
    with pytest.warns(StaleCatalogWarning, match=r"using the given catalog \(.*\) generated"):
        cat, _ = refresh(["us-east-1"], progress=False, endpoint_url=closed_port_url(), max_attempts=1, base=mine)
    assert cat.price("p3.2xlarge", "us-east-1", "on-demand") == 1.0


def _seed_cache(cache: Path) -> dict[Path, bytes]:
    (cache / "aws").mkdir(parents=True, exist_ok=True)
    old = Catalog.default().to_dict()
    old["refreshed_at"] = "2026-01-01T00:00:00Z"
    Catalog(old).save(cache / "catalog.json")
    (cache / "aws" / "us-east-1.json").write_text('{"fetched_at": "2026-01-01T00:00:00Z"}')
    return {p: p.read_bytes() for p in cache.rglob("*") if p.is_file()}


def test_interrupted_refresh_leaves_cache_whole(aws_env: Path) -> None:
    before = _seed_cache(aws_env)
    ec2, _ = stub_ec2_flow([G4])
    spot_client, spot_stub = stubbed("ec2")
    expect_spot(spot_stub, ["g4dn.xlarge"], [])

    class Interrupting:
        def get_paginator(self, name: str) -> Any:
            raise KeyboardInterrupt  # Ctrl-C in the middle of the pricing calls

    with pytest.raises(KeyboardInterrupt):
        refresh(["us-east-1"], clients=Clients(None, spot_client, Interrupting(), ec2_client=ec2),
                progress=False, now=NOW, workers=1, instance_types=["g4dn.xlarge"], max_age_s=0)
    assert {p: p.read_bytes() for p in aws_env.rglob("*") if p.is_file()} == before


def test_interrupted_write_is_atomic(aws_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = _seed_cache(aws_env)

    def boom(src: Any, dst: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        Catalog.default().save(aws_env / "catalog.json")
    monkeypatch.undo()
    assert {p: p.read_bytes() for p in aws_env.rglob("*") if p.is_file()} == before


def test_cache_dir_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("SRIFT_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "srift"
    monkeypatch.setenv("SRIFT_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine"


def test_bad_regions_argument() -> None:
    with pytest.raises(ValueError, match="regions = 'us-east-1'"):
        refresh("us-east-1", progress=False)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'moon-base'"):
        refresh(["moon-base"], progress=False)


# ----------------------------------------------------------------------------- CLI

def _parser() -> argparse.ArgumentParser:
    from srift.cli_catalog import register

    parser = argparse.ArgumentParser(prog="srift")
    register(parser.add_subparsers(dest="command", required=True))
    return parser


def _run(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    return args.func(args)


def test_cli_show_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["catalog", "show", "--family", "p3", "--region", "us-east-1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    names = [i["name"] for i in out["instances"]]
    assert names == ["p3.16xlarge", "p3.2xlarge", "p3.8xlarge"]
    assert out["instances"][0]["on_demand"]["usd_per_hour"] == pytest.approx(24.48)
    assert _run(["catalog", "show", "--gpu", "NVIDIA A100-SXM4-80GB"]) == 0
    text = capsys.readouterr().out
    assert "p4de.24xlarge" in text and "p4d.24xlarge " not in text
    # each GPU's compute capability, and an arm64 host (srift.torch_support: which wheels run it)
    assert _run(["catalog", "show", "--family", "g5g", "--family", "p4de"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["instance", "GPUs", "CC", "GiB/GPU"]
    rows = {line.split()[0]: line.split() for line in lines[2:] if line and not line[0].isdigit()}
    assert rows["p4de.24xlarge"][3] == "8.0" and rows["g5g.xlarge"][3:5] == ["7.5", "arm64"]
    assert _run(["catalog", "show", "--family", "g5g", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["instances"][0]
    assert shown["cpu_arch"] == "arm64" and shown["gpu_spec"]["compute_capability"] == "7.5"


def test_cli_diff(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = Catalog.default()
    new = old.with_overrides({"schema": "srift.catalog-overrides/1",
                              "prices": [{"instance": "p3.2xlarge", "region": "us-east-1", "market": "on-demand", "usd_per_hour": 2.5}],
                              "instances": {"p3.2xlarge": {"status": "unlisted"}}})
    old.save(tmp_path / "a.json")
    new.save(tmp_path / "b.json")
    assert _run(["catalog", "diff", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 0
    text = capsys.readouterr().out
    assert "p3.2xlarge.status: 'current' -> 'unlisted'" in text
    assert "$ on-demand p3.2xlarge us-east-1: 3.06 -> 2.5" in text
    assert _run(["catalog", "diff", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["price_changes"] == [{"market": "on-demand", "instance": "p3.2xlarge", "region": "us-east-1",
                                   "old_usd_per_hour": 3.06, "new_usd_per_hour": 2.5}]


def test_cli_refresh_unreachable(capsys: pytest.CaptureFixture[str]) -> None:
    url = closed_port_url()
    assert _run(["catalog", "refresh", "--regions", "us-east-1", "--endpoint-url", url, "--max-attempts", "1"]) == 0
    captured = capsys.readouterr()
    assert "bundled snapshot" in captured.err and "days old" in captured.err
    assert _run(["catalog", "refresh", "--regions", "us-east-1", "--endpoint-url", url,
                 "--max-attempts", "1", "--no-fallback"]) == 2
    assert "unreachable" in capsys.readouterr().err


def test_cli_overrides_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ov = tmp_path / "ov.toml"
    ov.write_text('schema = "srift.catalog-overrides/1"\n[[prices]]\ninstance = "p3.2xlarge"\n'
                  'region = "us-east-1"\nmarket = "spot"\nusd_per_hour = 0.25\n')
    assert _run(["catalog", "show", "--family", "p3", "--region", "us-east-1", "--json",
                 "--catalog-overrides", str(ov)]) == 0
    out = json.loads(capsys.readouterr().out)
    p32 = next(i for i in out["instances"] if i["name"] == "p3.2xlarge")
    assert p32["spot"]["usd_per_hour"] == 0.25


def test_refresh_with_an_unknown_aws_profile_is_one_line(tmp_path, monkeypatch, capsys):
    # botocore's ProfileNotFound used to come out as a traceback
    from srift.cli import main

    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    assert main(["catalog", "refresh", "--profile", "nosuchprofile"]) == 2
    assert "--profile 'nosuchprofile': no such AWS profile" in capsys.readouterr().err


@pytest.mark.parametrize("age", ["nan", "-1", "inf", "soon"])
def test_refresh_max_age_must_be_hours_ge_0(age, capsys):
    # NaN and -1 were taken as given
    from srift.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["catalog", "refresh", "--max-age-hours", age])
    assert exc.value.code == 2
    assert "argument --max-age-hours: expected a" in capsys.readouterr().err


def test_cli_diff_reports_interruptions_quotas_and_gpus(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # each changes plans (the spot model, a type's cap, the GPU table), and diff said "no differences"
    old = Catalog.default()
    d = old.to_dict()
    before = d["interruption"]["p3.16xlarge"]["us-east-1"]
    d["interruption"]["p3.16xlarge"]["us-east-1"] = ">20%"
    d["quotas"]["p3.2xlarge"] = 4
    d["gpus"]["X100-99GB"] = dict(d["gpus"]["T4"])
    Catalog.from_dict(d).save(tmp_path / "b.json")
    old.save(tmp_path / "a.json")
    assert _run(["catalog", "diff", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 0
    text = capsys.readouterr().out
    assert f"! spot interruption p3.16xlarge us-east-1: {before} -> >20%" in text
    assert "# quota p3.2xlarge: - -> 4" in text and "+ gpu X100-99GB" in text
    assert _run(["catalog", "diff", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["interruption_changes"] == [{"instance": "p3.16xlarge", "region": "us-east-1", "old": before,
                                            "new": ">20%"}]
    assert out["quota_changes"] == [{"instance": "p3.2xlarge", "old": None, "new": 4}]
    assert out["added_gpus"] == ["X100-99GB"] and out["removed_gpus"] == []
    assert _run(["catalog", "diff", str(tmp_path / "a.json"), str(tmp_path / "a.json")]) == 0
    assert capsys.readouterr().out.strip() == "no differences"


# ----------------------------------------------------------------------------- review: refresh merge

def _refresh_one_region(region: str, listed: list[dict], ask: list[str], **kwargs: Any) -> tuple[Catalog, Any]:
    """Refresh ``region`` for the types ``ask`` where EC2 lists (and offers) only ``listed``."""
    client, stub = stubbed("ec2")
    stub.add_response("describe_instance_types", {"InstanceTypes": listed},
                      {"Filters": [{"Name": "instance-type", "Values": sorted(ask)}]})
    stub.add_response("describe_instance_type_offerings", {"InstanceTypeOfferings": [
        {"InstanceType": t["InstanceType"], "LocationType": "region", "Location": region} for t in listed]},
        {"LocationType": "region", "Filters": [{"Name": "location", "Values": [region]}]})
    kwargs.setdefault("base", Catalog.default())
    return refresh([region], clients=Clients(None, ec2_client=client), progress=False, now=NOW,
                   instance_types=ask, spot=False, on_demand=False, **kwargs)


def test_a_type_missing_in_one_region_stays_offered_in_the_others() -> None:
    # refreshing ap-northeast-1 alone, where EC2 no longer lists p4d, used to mark p4d
    # "unlisted" for the whole catalog: it vanished from us-east-1, which nobody asked about
    base = Catalog.default()
    assert "ap-northeast-1" in base.instance("p4d.24xlarge").regions
    cat, report = _refresh_one_region("ap-northeast-1", [], ["p4d.24xlarge"])
    p4d = cat.instance("p4d.24xlarge")
    assert p4d.status == "current" and "ap-northeast-1" not in p4d.regions and "us-east-1" in p4d.regions
    assert "p4d.24xlarge" in {o.instance for o in cat.offers("us-east-1")}
    assert "p4d.24xlarge" not in {o.instance for o in cat.offers("ap-northeast-1", ["on-demand", "spot"])}
    assert cat.price("p4d.24xlarge", "ap-northeast-1") is None
    assert report.withdrawn == ["p4d.24xlarge@ap-northeast-1"] and report.unlisted == []


def test_a_type_no_longer_offered_in_a_region_loses_its_prices_there() -> None:
    # the region left the type's list but its snapshot price stayed, and recommend planned it there
    base = Catalog.default()
    g4dn = instance_type_entry("g4dn.xlarge", "T4", 1, 16384, 5.0)
    client, stub = stubbed("ec2")
    stub.add_response("describe_instance_types", {"InstanceTypes": [g4dn]},
                      {"Filters": [{"Name": "instance-type", "Values": ["g4dn.xlarge"]}]})
    stub.add_response("describe_instance_type_offerings", {"InstanceTypeOfferings": []},  # listed, not offered
                      {"LocationType": "region", "Filters": [{"Name": "location", "Values": ["us-east-1"]}]})
    cat, report = refresh(["us-east-1"], clients=Clients(None, ec2_client=client), progress=False, now=NOW,
                          instance_types=["g4dn.xlarge"], spot=False, on_demand=False, cache=False)
    assert base.price("g4dn.xlarge", "us-east-1")
    assert cat.price("g4dn.xlarge", "us-east-1") is None and cat.price("g4dn.xlarge", "us-east-1", "spot") is None
    assert cat.spot_zones("g4dn.xlarge", "us-east-1") == []
    assert not [o for o in cat.offers("us-east-1", ["on-demand", "spot"]) if o.instance == "g4dn.xlarge"]
    assert cat.price("g4dn.xlarge", "eu-west-1") == base.price("g4dn.xlarge", "eu-west-1")
    assert report.withdrawn == ["g4dn.xlarge@us-east-1"] and report.instance_types == 0


def test_a_retired_type_stays_retired_through_refreshes() -> None:
    # retired -> "unlisted" (a region without it) -> "current" (a region with it) used to make
    # a retired generation plannable
    base = Catalog.default()
    assert base.instance("g3.4xlarge").status == "retired"
    gone, _ = _refresh_one_region("ap-northeast-1", [], ["g3.4xlarge"], cache=False)
    assert gone.instance("g3.4xlarge").status == "retired"
    region = next(r for r in gone.instance("g3.4xlarge").regions)
    back, _ = _refresh_one_region(region, [instance_type_entry("g3.4xlarge", "M60", 1, 8192, 10.0)],
                                  ["g3.4xlarge"], base=gone, cache=False)
    assert back.instance("g3.4xlarge").status == "retired"
    assert "g3.4xlarge" not in {o.instance for o in back.offers(region)}


def test_a_type_offered_nowhere_after_a_refresh_is_unlisted() -> None:
    base = Catalog.default()
    regions = base.instance("p5.48xlarge").regions
    client, stub = stubbed("ec2")
    for region in sorted(regions):
        stub.add_response("describe_instance_types", {"InstanceTypes": []},
                          {"Filters": [{"Name": "instance-type", "Values": ["p5.48xlarge"]}]})
        stub.add_response("describe_instance_type_offerings", {"InstanceTypeOfferings": []},
                          {"LocationType": "region", "Filters": [{"Name": "location", "Values": [region]}]})
    cat, report = refresh(regions, clients=Clients(None, ec2_client=client), progress=False, now=NOW,
                          instance_types=["p5.48xlarge"], spot=False, on_demand=False, cache=False)
    assert cat.instance("p5.48xlarge").status == "unlisted" and not cat.instance("p5.48xlarge").regions
    assert report.unlisted == ["p5.48xlarge"]


def test_patterns_scope_what_a_refresh_can_withdraw() -> None:
    # type_patterns=["p5*"] asks EC2 about p5 only: every g type, never asked about, keeps its regions
    client, stub = stubbed("ec2")
    stub.add_response("describe_instance_types", {"InstanceTypes": []},
                      {"Filters": [{"Name": "instance-type", "Values": ["p5*"]}]})
    stub.add_response("describe_instance_type_offerings", {"InstanceTypeOfferings": []},
                      {"LocationType": "region", "Filters": [{"Name": "location", "Values": ["us-east-1"]}]})
    cat, report = refresh(["us-east-1"], clients=Clients(None, ec2_client=client), progress=False, now=NOW,
                          type_patterns=["p5*"], spot=False, on_demand=False, cache=False)
    assert "us-east-1" in cat.instance("g5.xlarge").regions
    assert report.withdrawn and all(w.startswith("p5") for w in report.withdrawn)


def test_no_live_spot_price_drops_the_old_one_and_says_so() -> None:
    # it used to keep the snapshot's undated spot price silently, and the planner bought it
    base = Catalog.default()
    assert base.price("p3.16xlarge", "us-east-1", "spot")
    p3 = instance_type_entry("p3.16xlarge", "V100", 8, 16384, 25.0)
    ec2, _ = stub_ec2_flow([p3])
    spot_client, spot_stub = stubbed("ec2")
    expect_spot(spot_stub, ["p3.16xlarge"], [])
    with pytest.warns(RuntimeWarning, match=r"1 offered \(type, region\) pairs have no spot price on AWS now "
                                            r"\(p3.16xlarge@us-east-1\)"):
        cat, report = refresh(["us-east-1"], clients=Clients(None, spot_client=spot_client, ec2_client=ec2),
                              progress=False, now=NOW, instance_types=["p3.16xlarge"], on_demand=False, cache=False)
    assert cat.price("p3.16xlarge", "us-east-1", "spot") is None and cat.spot_zones("p3.16xlarge", "us-east-1") == []
    assert cat.price("p3.16xlarge", "us-east-1") == base.price("p3.16xlarge", "us-east-1")
    assert report.spot_withdrawn == ["p3.16xlarge@us-east-1"]


# ----------------------------------------------------------------------------- review: cache, regions

def test_a_narrow_refresh_is_not_reused_for_a_whole_region(aws_env: Path) -> None:
    # a refresh of one type, cached by region alone, answered a later full refresh without a
    # call and marked every other type unlisted
    g4dn = instance_type_entry("g4dn.xlarge", "T4", 1, 16384, 5.0)
    ec2, _ = stub_ec2_flow([g4dn])
    refresh(["us-east-1"], clients=Clients(None, ec2_client=ec2), progress=False, now=NOW,
            instance_types=["g4dn.xlarge"], spot=False, on_demand=False)
    assert (aws_env / "aws" / "us-east-1.json").is_file()

    class Refuses(AwsClients):
        def ec2(self, region: str) -> Any:
            raise RuntimeError("called AWS")

    with pytest.raises(RuntimeError, match="called AWS"):  # a miss: the cached answer does not cover this
        refresh(["us-east-1"], clients=Refuses(), progress=False, now=NOW + dt.timedelta(hours=1))
    with pytest.raises(RuntimeError, match="called AWS"):  # nor a request for its spot prices
        refresh(["us-east-1"], clients=Refuses(), progress=False, now=NOW + dt.timedelta(hours=1),
                instance_types=["g4dn.xlarge"], on_demand=False)
    # what it covers is served from the cache
    _, report = refresh(["us-east-1"], clients=Refuses(), progress=False, now=NOW + dt.timedelta(hours=1),
                        instance_types=["g4dn.xlarge"], spot=False, on_demand=False)
    assert report.from_cache == ["us-east-1"]


def test_scope_cover_rules() -> None:
    from srift.catalog_aws import _fetch_scope, _scope_covers

    everything = _fetch_scope(None, None, True, True)
    gp = _fetch_scope(None, ["g*", "p*"], True, True)
    one = _fetch_scope(["g5.xlarge"], None, True, False)
    assert _scope_covers(everything, gp) and _scope_covers(gp, _fetch_scope(["p5.48xlarge"], None, True, True))
    assert not _scope_covers(gp, everything) and not _scope_covers(one, gp)
    assert _scope_covers(one, _fetch_scope(["g5.xlarge"], None, True, False))
    assert not _scope_covers(one, _fetch_scope(["g5.xlarge"], None, True, True))  # no on-demand prices in it
    assert not _scope_covers(gp, _fetch_scope(["inf2.xlarge"], None, False, False))


@pytest.mark.parametrize("bad", [
    {"spot_zones": {"g5.xlarge": [{"zone": "us-west-2a", "usd_per_hour": 0.4}]}},  # a row without as_of/source
    {"instance_types": []},
    {"on_demand": {"g5.xlarge": {"us-west-2": {"usd_per_hour": -1, "as_of": None, "source": "x"}}}},
    {"scope": None},
])
def test_a_cache_entry_of_another_shape_is_a_miss(aws_env: Path, bad: dict) -> None:
    # used to end in KeyError / AttributeError tracebacks
    doc = {"region": "us-west-2", "fetched_at": FETCHED,
           "scope": {"instance_types": ["g5.xlarge"], "type_patterns": None, "spot": True, "on_demand": True},
           "instance_types": {"g5.xlarge": G5_XLARGE_FIELDS}, "offered": ["g5.xlarge"], "spot_zones": {},
           "on_demand": {}}
    from srift.catalog_aws import _fetch_scope, _read_region_cache

    aws_env.mkdir(parents=True, exist_ok=True)
    path = aws_env / "r.json"
    path.write_text(json.dumps(doc))
    wanted = _fetch_scope(["g5.xlarge"], None, True, True)
    assert _read_region_cache(path, 3600, NOW, wanted) is not None
    path.write_text(json.dumps({**doc, **bad}))
    assert _read_region_cache(path, 3600, NOW, wanted) is None


def _auth_failure(stub: Stubber, code: str = "AuthFailure") -> None:
    stub.add_client_error("describe_instance_types", service_error_code=code, http_status_code=401,
                          service_message="AWS was not able to validate the provided access credentials")


def test_a_region_not_enabled_is_skipped_not_fatal() -> None:
    # the default refresh covers 11 opt-in regions; the first one's AuthFailure aborted everything
    g4dn = instance_type_entry("g4dn.xlarge", "T4", 1, 16384, 5.0)
    disabled, dstub = stubbed("ec2")
    _auth_failure(dstub)
    enabled, _ = stub_ec2_flow([g4dn])

    class PerRegion(AwsClients):
        def ec2(self, region: str) -> Any:
            return disabled if region == "af-south-1" else enabled

    with pytest.warns(RuntimeWarning, match="af-south-1: skipped: EC2 answered AuthFailure"):
        cat, report = refresh(["af-south-1", "us-east-1"], clients=PerRegion(), progress=False, now=NOW,
                              instance_types=["g4dn.xlarge"], spot=False, on_demand=False, cache=False)
    assert report.skipped_regions == ["af-south-1"]
    base = Catalog.default()
    assert cat.instance("g4dn.xlarge").regions == base.instance("g4dn.xlarge").regions  # af-south-1 untouched


def test_every_region_refused_is_an_error() -> None:
    client, stub = stubbed("ec2")
    _auth_failure(stub, "OptInRequired")
    with pytest.raises(PermissionError, match=r"every region refused DescribeInstanceTypes \(me-south-1\)"), \
            pytest.warns(RuntimeWarning, match="me-south-1: skipped"):
        refresh(["me-south-1"], clients=Clients(None, ec2_client=client), progress=False, now=NOW,
                instance_types=["g4dn.xlarge"], spot=False, on_demand=False, cache=False)


def test_access_denied_still_stops_the_refresh() -> None:
    client, stub = stubbed("ec2")
    stub.add_client_error("describe_instance_types", service_error_code="UnauthorizedOperation",
                          http_status_code=403, service_message="not authorized")
    with pytest.raises(PermissionError, match="ec2:DescribeInstanceTypes"):
        refresh(["us-east-1", "us-west-2"], clients=Clients(None, ec2_client=client), progress=False, now=NOW,
                instance_types=["g4dn.xlarge"], spot=False, on_demand=False, cache=False)


# ----------------------------------------------------------------------------- review: CLI, overrides

def test_refresh_keeps_negotiated_prices_and_out_of_the_cache(aws_env: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    # --catalog-overrides on refresh: the live public price replaced the negotiated one, and the
    # shared cache kept the user's private prices
    import srift.catalog_aws as aws

    ov = tmp_path / "neg.toml"
    ov.write_text('schema = "srift.catalog-overrides/1"\n[[prices]]\ninstance = "g4dn.xlarge"\n'
                  'region = "us-east-1"\nmarket = "on-demand"\nusd_per_hour = 0.30\nsource = "our EDP"\n')
    g4dn = instance_type_entry("g4dn.xlarge", "T4", 1, 16384, 5.0)
    ec2, _ = stub_ec2_flow([g4dn])
    pricing, pstub = stubbed("pricing")
    expect_price(pstub, "g4dn.xlarge", "us-east-1", price_document("SKU", "g4dn.xlarge", "us-east-1", "0.5260000000"))
    real = aws.refresh

    def fake(regions, session, **kw):  # the CLI's call, with our stubbed clients and scope
        return real(regions, session, **{**kw, "clients": Clients(None, pricing_client=pricing, ec2_client=ec2),
                                        "instance_types": ["g4dn.xlarge"], "spot": False, "now": NOW, "workers": 1})

    monkeypatch.setattr(aws, "refresh", fake)
    out = tmp_path / "cat.json"
    assert _run(["catalog", "refresh", "--regions", "us-east-1", "--catalog-overrides", str(ov),
                 "--out", str(out)]) == 0
    assert "overrides applied over the refreshed catalog" in capsys.readouterr().out
    assert Catalog.load(out).price("g4dn.xlarge", "us-east-1") == 0.30
    assert Catalog.load(aws_env / "catalog.json").price("g4dn.xlarge", "us-east-1") == pytest.approx(0.526)


def test_a_refresh_of_a_given_catalog_is_not_cached(aws_env: Path) -> None:
    g4dn = instance_type_entry("g4dn.xlarge", "T4", 1, 16384, 5.0)
    ec2, _ = stub_ec2_flow([g4dn])
    mine = Catalog(Catalog.default().to_dict(), origin="mine.json")
    _, report = refresh(["us-east-1"], clients=Clients(None, ec2_client=ec2), progress=False, now=NOW, base=mine,
                        instance_types=["g4dn.xlarge"], spot=False, on_demand=False)
    assert report.cache_path is None and not (aws_env / "catalog.json").exists()


def test_repeated_catalog_overrides_apply_in_order(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # only the last --catalog-overrides counted: probe-network's intra and network files together lost one
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.write_text('schema = "srift.catalog-overrides/1"\n[quotas]\n"p3.2xlarge" = 3\n'
                 '[[prices]]\ninstance = "p3.2xlarge"\nregion = "us-east-1"\nmarket = "on-demand"\nusd_per_hour = 1.0\n')
    b.write_text('schema = "srift.catalog-overrides/1"\n'
                 '[[prices]]\ninstance = "p3.2xlarge"\nregion = "us-east-1"\nmarket = "on-demand"\nusd_per_hour = 2.0\n')
    assert _run(["catalog", "show", "--family", "p3", "--region", "us-east-1", "--json",
                 "--catalog-overrides", str(a), "--catalog-overrides", str(b)]) == 0
    p32 = next(i for i in json.loads(capsys.readouterr().out)["instances"] if i["name"] == "p3.2xlarge")
    assert p32["on_demand"]["usd_per_hour"] == 2.0  # the later file wins
    from srift.cli import build_parser, _catalog

    args = build_parser().parse_args(["predict", "--model", "resnet50", "--cluster", "p3.2xlarge",
                                      "--global-batch", "8", "--catalog-overrides", str(a),
                                      "--catalog-overrides", str(b)])
    cat = _catalog(args)
    assert cat.quota("p3.2xlarge") == 3 and cat.price("p3.2xlarge", "us-east-1") == 2.0


@pytest.mark.parametrize("text", ['schema = "srift.catalog-overrides/1"\ninstances = 5\n',
                                  '{"schema": "srift.catalog-overrides/1", "gpus": ["T4"]}'])
def test_an_overrides_section_that_is_not_a_table_is_named(tmp_path: Path, text: str) -> None:
    path = tmp_path / ("o.toml" if "instances" in text else "o.json")
    path.write_text(text)
    with pytest.raises(ValueError, match=r"\$\.(instances|gpus) = .*: must be a table"):
        Catalog.default().with_overrides(path)


def test_show_json_is_not_mistaken_for_a_catalog(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["catalog", "show", "--family", "p5", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["schema"] == "srift.catalog-show/1"


def test_show_names_the_prices_dates(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["catalog", "show", "--family", "p5"]) == 0
    assert "on-demand prices dated 2026-01-21" in capsys.readouterr().out


def test_a_bad_generated_at_is_named(tmp_path: Path) -> None:
    d = Catalog.default().to_dict()
    d["generated_at"] = "last tuesday"
    (tmp_path / "c.json").write_text(json.dumps(d))
    with pytest.raises(ValueError, match=r"c.json: \$\.generated_at = 'last tuesday': must be an ISO 8601"):
        Catalog.load(tmp_path / "c.json")
