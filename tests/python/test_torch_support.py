"""Only clusters the user's PyTorch runs: the wheel table, the capability rule (note "wheel runs
GPU"), the target release, and recommend/pareto/predict under it (note "one wheel per plan")."""
from __future__ import annotations

import copy
import json
import re
import warnings
from pathlib import Path

import pytest

import srift
from srift import torch_support as ts
from srift.profile_data import Profile
from srift.torch_support import TorchSupportWarning, load_table, resolve_target

V100_B200 = "1x p3.16xlarge + 1x p6-b200.48xlarge"
MIXED_TYPES = ["p3.16xlarge", "p3.8xlarge", "p6-b200.48xlarge", "g6.xlarge"]


def runs(release: str, capability: str) -> list[str]:
    target = resolve_target(release)
    return [v.name for v in target.variants_for([capability])]


# ---------------------------------------------------------------------------- the table and the rule

def test_catalog_gpus_carry_their_compute_capability(catalog) -> None:
    caps = {key: catalog.gpu(key).compute_capability for key in catalog.gpu_keys()}
    assert caps == {"K80": "3.7", "M60": "5.2", "V100-16GB": "7.0", "V100-32GB": "7.0", "T4": "7.5",
                    "A10G": "8.6", "A100-40GB": "8.0", "A100-80GB": "8.0", "L4": "8.9", "L40S": "8.9",
                    "H100-80GB": "9.0", "H200-141GB": "9.0", "B200": "10.0", "B300": "10.3",
                    "RTX-PRO-6000": "12.0"}


def test_exact_cases_of_2_13() -> None:
    assert runs("2.13", "7.0") == ["cu126"]                       # V100: the legacy CUDA 12.6 wheel only
    assert runs("2.13", "10.0") == ["cu130", "cu132"]             # B200: CUDA 13 only
    assert runs("2.13", "10.3") == ["cu130", "cu132"]             # B300 runs the sm_100 cubin
    assert runs("2.13", "12.0") == ["cu130", "cu132"]             # RTX PRO 6000 Blackwell
    assert runs("2.13", "5.2") == ["cu126"]                       # M60 runs the sm_50 cubin
    assert runs("2.13", "3.7") == []                              # K80: no release in the table
    # release wheels carry no PTX (pytorch/pytorch#188914: RELEASE.md's "12.0+PTX" is the
    # nightlies'), so no GPU of a major past the newest cubin's runs: a 13.0 GPU ran cu130/cu132
    assert all(runs(r, "13.0") == [] for r in ("2.9", "2.10", "2.11", "2.12", "2.13", "2.14", "2.15"))
    assert runs("2.13", "12.1") == ["cu130", "cu132"]             # the sm_120 cubin runs on 12.1
    assert all(not v.ptx for r in load_table().releases for v in r.variants)
    # L4 (8.9): no wheel has an sm_89 cubin; the sm_86 one runs on it, in every variant
    release = resolve_target("2.13").release
    assert all((8, 9) not in v.sass and (8, 6) in v.sass for v in release.variants)
    assert runs("2.13", "8.9") == ["cu126", "cu130", "cu132"]
    assert resolve_target("2.13").variants_for(["7.0", "10.0"]) == []


def test_exact_cases_of_2_15_and_2_11() -> None:
    assert runs("2.15", "7.0") == []                              # no CUDA 12.6 wheels: no V100
    assert runs("2.15", "5.2") == []
    assert runs("2.15", "8.9") == ["cu130", "cu132"]
    assert runs("2.11", "7.0") == ["cu126"]                       # sm_70 left cu128 in 2.11
    assert runs("2.10", "7.0") == ["cu126", "cu128"]              # ... and was in 2.10's


def test_ptx_runs_newer_capabilities_and_only_those() -> None:
    v = ts.WheelVariant("cu130", "13.0", sass=((7, 5), (9, 0)), ptx=((12, 0),))
    assert v.runs("12.1") and v.runs("13.0")                      # PTX compiles for any capability >= its own
    assert not v.runs("11.0")                                     # nor is a 9.0 cubin another major's
    assert v.runs("9.0") and v.runs("7.5") and not v.runs("7.0") and not v.runs("8.6")
    assert v.runs(None)                                           # unknown capability: taken to run


def test_shipped_table_is_dated_sourced_and_ordered() -> None:
    table = load_table()
    assert table.as_of == json.loads(ts.TABLE_PATH.read_text())["as_of"]
    keys = [r.key for r in table.releases]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert all(r.sources and all(s.startswith("https://") for s in r.sources) for r in table.releases)


def _table(tmp_path: Path, edit) -> Path:
    doc = json.loads(ts.TABLE_PATH.read_text())
    edit(doc)
    path = tmp_path / "wheels.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("edit, match", [
    (lambda d: d.update(schema="srift.torch-wheels/9"), r"schema: expected 'srift.torch-wheels/1'"),
    (lambda d: d.update(as_of="last week"), r"as_of: expected a date YYYY-MM-DD, got 'last week'"),
    (lambda d: d["releases"][0]["variants"][0]["sass"].__setitem__(1, "8.x"),
     r"releases\[0\]\.variants\[0\]\.sass\[1\]: expected a compute capability 'MAJOR.MINOR' such as '8.6', got '8.x'"),
    (lambda d: d["releases"][1].update(torch="2.9"), r"releases\[1\]\.torch: expected a release after 2.9"),
    (lambda d: d["releases"][0].update(sources=[]), r"releases\[0\]\.sources: expected a non-empty list"),
    (lambda d: d["releases"][0]["variants"][0].update(cuda="12.8"), r"releases\[0\]\.variants\[0\]\.cuda"),
    (lambda d: d["releases"][0]["variants"][1].update(name="cu126"), r"releases\[0\]\.variants\[1\]\.name"),
    (lambda d: d["releases"][0].update(status="rumoured"), r"releases\[0\]\.status: expected 'released' or 'announced'"),
])
def test_bad_tables_are_refused_by_name(tmp_path, edit, match) -> None:
    with pytest.raises(ValueError, match=match):
        load_table(_table(tmp_path, edit))


def test_a_repeated_key_in_the_table_is_refused(tmp_path) -> None:
    path = tmp_path / "wheels.json"
    path.write_text(ts.TABLE_PATH.read_text().replace('"as_of": "', '"as_of": "2026-01-01", "as_of": "', 1))
    with pytest.raises(ValueError, match="as_of.*appears twice"):
        load_table(path)


# ---------------------------------------------------------------------------- the target release

def test_target_release_from_argument_profile_or_installed(monkeypatch, fresh_profile) -> None:
    assert resolve_target("2.13.0+cu126").release.torch == "2.13"
    assert resolve_target("2.14.0.dev20260801+cu130").release.torch == "2.14"
    assert not resolve_target("source").checked
    assert not resolve_target("2.13.0a0+git1234abc").checked     # a build from source
    fresh_profile.torch_version = "2.11.0+cu128"
    t = resolve_target(None, fresh_profile)
    assert (t.release.torch, t.origin) == ("2.11", "profile")
    assert resolve_target("2.15", fresh_profile).release.torch == "2.15"   # the argument wins
    fresh_profile.torch_version = None
    monkeypatch.setattr(ts, "_installed_torch", lambda: "2.12.1+cpu")
    t = resolve_target(None, fresh_profile)
    assert (t.release.torch, t.origin) == ("2.12", "installed")


def test_a_cuda_label_given_as_the_argument_pins_that_variant(monkeypatch, fresh_profile, resnet50_profile,
                                                              catalog) -> None:
    # Note "pinned variant": --torch 2.13.0+cu126 says the training runs the cu126 build, which
    # has no Blackwell cubin: a B200 had been planned for it (the label was read as 2.13 alone)
    assert runs("2.13.0+cu126", "10.0") == [] and runs("2.13.0+cu126", "7.0") == ["cu126"]
    assert runs("2.13.0+cu130", "7.0") == [] and runs("2.13.0+cu130", "10.0") == ["cu130"]
    assert runs("2.13.0+cpu", "10.0") == ["cu130", "cu132"]        # no CUDA build named: the release
    with pytest.raises(ValueError, match=r"torch: '2.13.0\+cu128' names the CUDA variant cu128, and torch 2.13 "
                                         r"has no official cu128 wheel \(cu126, cu130, cu132\)"):
        resolve_target("2.13.0+cu128")
    # a profile's or the installed torch's label names the machine that profiled: no pin
    fresh_profile.torch_version = "2.13.0+cu126"
    assert [v.name for v in resolve_target(None, fresh_profile).release.variants] == ["cu126", "cu130", "cu132"]
    rec = srift.recommend(resnet50_profile, global_batch=1024, iterations=100_000, regions="us-east-1",
                          instance_types=MIXED_TYPES, max_usd_per_hour=300, catalog=catalog, torch="2.13.0+cu126")
    plans = [rec.best, *rec.alternatives]
    assert plans[0] is not None and all(p.prediction.torch_wheels == ["cu126"] for p in plans)
    assert all("B200" not in _gpus(p, catalog) for p in plans)
    assert rec.torch["wheels"] == ["cu126"] and rec.torch["dropped_gpus"] == {"B200": "10.0"}


def test_releases_past_the_table_use_its_newest_row_with_a_warning() -> None:
    with pytest.warns(TorchSupportWarning, match=r"torch 2.20 is newer than srift's wheel table \(newest 2.15"):
        t = resolve_target("2.20")
    assert t.release.torch == "2.15" and "newer" in t.note


@pytest.mark.parametrize("value, match", [
    ("2.8", r"torch: '2.8' \(argument\) is older than srift's wheel table, which starts at 2.9"),
    ("banana", r"torch: expected a PyTorch version such as '2.13'.*got 'banana'"),
    ("", r"torch: expected a PyTorch version"),
    (2.13, r"torch: expected a PyTorch version such as '2.13' or 'source', got 2.13"),
])
def test_bad_torch_versions_are_refused_by_name(value, match) -> None:
    with pytest.raises(ValueError, match=match):
        resolve_target(value)


# ---------------------------------------------------------------------------- profiles

def test_profiles_record_torch_and_old_profiles_still_load(resnet50_profile) -> None:
    import torch

    assert resnet50_profile.torch_version == torch.__version__
    assert resnet50_profile.torch_cuda == torch.version.cuda
    d = resnet50_profile.to_dict()
    assert Profile.from_dict(d).torch_version == torch.__version__
    old = {k: v for k, v in d.items() if k not in ("torch_version", "torch_cuda")}
    loaded = Profile.from_dict(old)
    assert loaded.torch_version is None and loaded.torch_cuda is None
    with pytest.raises(ValueError, match="torch_cuda"):
        Profile.from_dict({**d, "torch_cuda": "twelve"})


# ---------------------------------------------------------------------------- catalog overrides

def test_compute_capability_overrides_are_checked_by_name(catalog) -> None:
    ov = catalog.with_overrides({"schema": "srift.catalog-overrides/1", "gpus": {"V100-16GB": {"compute_capability": "7.5"}}})
    assert ov.gpu("V100-16GB").compute_capability == "7.5"
    with pytest.raises(ValueError, match=r"\$\.gpus\.T4\.compute_capability = '8,6': must be a CUDA compute capability 'MAJOR.MINOR'"):
        catalog.with_overrides({"schema": "srift.catalog-overrides/1", "gpus": {"T4": {"compute_capability": "8,6"}}})
    with pytest.raises(ValueError, match=r"compute_capability"):
        catalog.with_overrides({"schema": "srift.catalog-overrides/1", "gpus": {"T4": {"compute_capability": 7.5}}})


# ---------------------------------------------------------------------------- predict

def test_predict_on_a_cluster_no_wheel_runs_warns_and_says_so(resnet50_profile, catalog) -> None:
    with pytest.warns(TorchSupportWarning, match="V100-16GB and B200 together"):
        pred = srift.predict(resnet50_profile, V100_B200, 256, catalog=catalog, torch="2.13")
    assert pred.feasible and pred.iteration_s > 0                 # still predicted
    assert pred.torch_release == "2.13" and pred.torch_wheels == []
    assert "V100-16GB (sm_70) runs under cu126" in pred.torch_note
    assert "B200 (sm_100) runs under cu130, cu132" in pred.torch_note
    d = pred.to_dict()
    assert d["torch_wheels"] == [] and d["torch_note"] == pred.torch_note
    from srift import report

    assert pred.torch_note in report.explain_prediction(pred, catalog)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ok = srift.predict(resnet50_profile, "1x p3.16xlarge", 256, catalog=catalog, torch="2.13")
        off = srift.predict(resnet50_profile, V100_B200, 256, catalog=catalog, torch="source")
    assert ok.torch_wheels == ["cu126"]
    assert off.torch_wheels is None and off.torch_release is None
    assert off.iteration_s == pred.iteration_s                    # the check changes no prediction
    with pytest.warns(TorchSupportWarning, match=r"no official torch 2.15 wheel \(cu130, cu132\) runs V100-16GB"):
        assert srift.predict(resnet50_profile, "1x p3.16xlarge", 256, catalog=catalog, torch="2.15").torch_wheels == []


# ---------------------------------------------------------------------------- recommend and pareto

def _key(plan) -> tuple[str, str]:
    return str(plan.cluster), plan.region


def _gpus(plan, catalog) -> set[str]:
    return {catalog.instance(g.instance_type).gpu for g in plan.cluster.groups}


QUERIES = [dict(max_usd_per_hour=150), dict(max_usd_per_hour=300), dict(deadline_hours=3), dict(budget_usd=400)]


@pytest.mark.parametrize("question", QUERIES)
def test_recommend_returns_only_clusters_one_wheel_runs(resnet50_profile, catalog, question) -> None:
    kw = dict(global_batch=1024, iterations=100_000, regions="us-east-1", instance_types=MIXED_TYPES, top_k=8,
              catalog=catalog, **question)
    rec = srift.recommend(resnet50_profile, torch="2.13", **kw)
    plans = [rec.best, *rec.alternatives]
    assert plans[0] is not None
    target = resolve_target("2.13")
    for p in plans:
        caps = ts.gpu_capabilities(catalog, [g.instance_type for g in p.cluster.groups])
        assert p.prediction.torch_wheels == [v.name for v in target.variants_for(caps.values())] != []
    assert len({_key(p) for p in plans}) == len(plans)           # merged without repeats
    # exact: the best of the searches over each wheel's instance types, ranked as one search ranks
    sets = {"cu126": ["p3.16xlarge", "p3.8xlarge", "g6.xlarge"], "cu130": ["p6-b200.48xlarge", "g6.xlarge"]}
    pooled = {}
    for types in sets.values():
        r = srift.recommend(resnet50_profile, torch="source", **{**kw, "instance_types": types})
        for p in [r.best, *r.alternatives]:
            if p is not None:
                pooled[_key(p)] = p
    objective = (lambda p: (p.total_usd, p.total_hours)) if "deadline_hours" in question else \
        (lambda p: (p.total_hours, p.total_usd))
    expected = sorted(pooled.values(), key=objective)[:len(plans)]
    assert [objective(p) for p in plans] == pytest.approx([objective(p) for p in expected], rel=1e-12)
    assert rec.torch["searches"] == [{"wheels": ["cu126"], "gpus": ["L4", "V100-16GB"]},
                                     {"wheels": ["cu130", "cu132"], "gpus": ["B200", "L4"]}]


def test_a_t4_on_a_graviton_host_runs_no_official_aarch64_wheel(resnet50_profile, catalog) -> None:
    # g5g's T4 sits on an arm64 host, which installs the aarch64 wheels: their cubins start at
    # Ampere 8.0 (pytorch/pytorch#172663, #182849), so no 2.11+ wheel runs it. It was judged
    # by the x86_64 cubins, and the cheapest plan under 2.13 was 2x g5g.xlarge.
    assert catalog.instance("g5g.xlarge").cpu_arch == "arm64" and catalog.instance("g4dn.xlarge").cpu_arch == "x86_64"
    assert ts.gpu_capabilities(catalog, ["g5g.xlarge", "g4dn.xlarge"]) == {"T4 on arm64": ("7.5", "arm64"),
                                                                            "T4": ("7.5", "x86_64")}
    kw = dict(global_batch=256, iterations=10_000, deadline_hours=48, catalog=catalog, regions="us-east-1",
              instance_types=["g5g.xlarge", "g4dn.xlarge"], top_k=3)
    unchecked = srift.recommend(resnet50_profile, torch="source", **kw)
    assert str(unchecked.best.cluster) == "2x g5g.xlarge @us-east-1"
    rec = srift.recommend(resnet50_profile, torch="2.13", **kw)
    assert str(rec.best.cluster) == "2x g4dn.xlarge @us-east-1"
    assert all(_gpus(p, catalog) == {"T4"} and "g5g" not in str(p.cluster) for p in [rec.best, *rec.alternatives])
    assert rec.torch["dropped_gpus"] == {"T4 on arm64": "7.5"}
    with pytest.warns(TorchSupportWarning, match=r"T4 on arm64 \(sm_75\) runs under none of them"):
        assert srift.predict(resnet50_profile, "1x g5g.xlarge", 64, catalog=catalog, torch="2.13").torch_wheels == []
    # an aarch64 build the sources list no cubins for apart (2.10) is taken as the x86_64 one
    assert srift.predict(resnet50_profile, "1x g5g.xlarge", 64, catalog=catalog,
                         torch="2.10").torch_wheels == ["cu126", "cu128", "cu130"]
    v = resolve_target("2.13").release.variants[0]
    assert v.runs("8.6", "arm64") and not v.runs("7.5", "arm64") and v.runs("7.5", "x86_64")
    with pytest.raises(ValueError, match=r"\$\.instances\['g5g\.xlarge'\]\.cpu_arch = 'aarch64': must be the host "
                                         r"CPU's architecture: 'x86_64' or 'arm64'"):
        catalog.with_overrides({"schema": "srift.catalog-overrides/1",
                                "instances": {"g5g.xlarge": {"cpu_arch": "aarch64"}}})
    assert catalog.with_overrides({"schema": "srift.catalog-overrides/1", "instances": {
        "g4dn.xlarge": {"cpu_arch": "arm64"}}}).instance("g4dn.xlarge").cpu_arch == "arm64"


def test_without_the_check_the_same_query_mixes_v100_and_b200(resnet50_profile, catalog) -> None:
    rec = srift.recommend(resnet50_profile, global_batch=1024, iterations=100_000, regions="us-east-1",
                          instance_types=MIXED_TYPES, top_k=8, catalog=catalog, max_usd_per_hour=300, torch="source")
    assert any(_gpus(p, catalog) >= {"V100-16GB", "B200"} for p in [rec.best, *rec.alternatives])
    assert rec.torch == {"version": "source", "origin": "argument", "release": None, "checked": False,
                         "note": "a build of your own (torch='source'): every GPU is taken to run"}


def test_pareto_front_keeps_only_runnable_plans(resnet50_profile, catalog) -> None:
    kw = dict(global_batch=1024, iterations=100_000, regions="us-east-1", instance_types=MIXED_TYPES, catalog=catalog)
    front = srift.pareto(resnet50_profile, torch="2.13", **kw)
    unchecked = srift.pareto(resnet50_profile, torch="source", **kw)
    assert front and all(p.prediction.torch_wheels for p in front)
    # the front of the runnable plans: each one cheaper than every faster one
    usd = [p.total_usd for p in front]
    assert usd == sorted(usd, reverse=True) and len(set(usd)) == len(usd)
    runnable = [p for p in unchecked if not _gpus(p, catalog) >= {"V100-16GB", "B200"}]
    assert {_key(p) for p in runnable} <= {_key(p) for p in front}


NEAR_MISSES = [dict(deadline_hours=0.5), dict(deadline_hours=0.5, budget_usd=100),
               dict(deadline_hours=0.5, max_usd_per_hour=20), dict(budget_usd=1), dict(max_usd_per_hour=1)]


@pytest.mark.parametrize("question", NEAR_MISSES)
def test_nothing_fits_gives_the_closest_and_sentence_one_search_gives(resnet50_profile, catalog, question) -> None:
    # One instance type per plan: every plan runs under some 2.13 wheel (V100 under cu126, B200
    # under CUDA 13, A10G under all), so the split search must answer as the unchecked one does:
    # the same closest plan (note "closest": the fastest near miss of a deadline, not the
    # cheapest; it had been 2x g5.12xlarge at 5.56 h instead of 2x p6-b200 at 42.6 min) and the
    # same sentence, whose "with no budget the fastest takes" had been one search's fastest.
    kw = dict(global_batch=512, iterations=100_000, regions="us-east-1", max_types=1, max_instances_per_type=2,
              instance_types=["p3.2xlarge", "p3.8xlarge", "p6-b200.48xlarge", "g5.12xlarge"], catalog=catalog,
              **question)
    checked = srift.recommend(resnet50_profile, torch="2.13", **kw)
    unchecked = srift.recommend(resnet50_profile, torch="source", **kw)
    assert checked.best is None and unchecked.best is None
    assert _key(checked.closest) == _key(unchecked.closest)
    assert checked.closest.total_hours == unchecked.closest.total_hours
    assert checked.why_none.startswith(unchecked.why_none + ". One DDP job runs one PyTorch build")
    if "deadline_hours" in question and len(question) == 1:
        assert str(checked.closest.cluster) == "2x p6-b200.48xlarge @us-east-1"
    if len(question) == 2:
        assert unchecked.why_none.endswith("the fastest takes 42.6 min")


def test_nothing_runs_says_which_gpus_were_dropped_and_why(resnet50_profile, catalog) -> None:
    rec = srift.recommend(resnet50_profile, global_batch=256, iterations=1000, deadline_hours=12, catalog=catalog,
                          instance_types=["p3.16xlarge", "p3.2xlarge"], torch="2.15")
    assert rec.best is None
    assert "No official torch 2.15 wheel (cu130, cu132) runs V100-16GB (sm_70)" in rec.why_none
    assert rec.torch["dropped_gpus"] == {"V100-16GB": "7.0"}
    held = srift.recommend(resnet50_profile, global_batch=256, iterations=1000, deadline_hours=12, catalog=catalog,
                           held=V100_B200 + " @us-east-1", torch="2.13")
    assert held.best is None
    assert "held instances cannot run one PyTorch build" in held.why_none
    assert "V100-16GB and B200 together" in held.why_none


def test_a_deadline_nothing_meets_reads_as_sentences_and_plans_name_their_wheels(resnet50_profile, catalog) -> None:
    """A first-time user's run through the docs: the deadline's reason ran into the wheel check's
    sentence ("the fastest takes 31.6 min One DDP job runs ..."), and ``Plan.torch_wheels``, which
    the README and recommend's docstring name, was no attribute of a Plan (AttributeError)."""
    kw = dict(global_batch=256, iterations=100_000, catalog=catalog, torch="2.13")
    rec = srift.recommend(resnet50_profile, deadline_hours=1 / 60, **kw)
    assert rec.best is None and rec.why_none.startswith("no plan meets the deadline of 1 min; the fastest takes ")
    # each reason a sentence: the wheel check's own (an arm64 host left out, the per-wheel search)
    assert re.search(r"the fastest takes [0-9.]+ (min|h)\. [A-Z]", rec.why_none), rec.why_none
    assert re.search(r"\. [Oo]ne DDP job runs one PyTorch build, so plans were searched per wheel: |; one DDP job runs one "
                     r"PyTorch build, so plans were searched per wheel: ", rec.why_none), rec.why_none
    best = srift.recommend(resnet50_profile, deadline_hours=12, **kw).best
    assert best.torch_wheels == best.prediction.torch_wheels == best.to_dict()["torch_wheels"] == \
        ["cu126", "cu130", "cu132"]  # the quickstart's 2x g5.2xlarge: A10G, sm_86


def test_the_quickstart_answer_is_unchanged_under_2_13(resnet50_profile, catalog) -> None:
    kw = dict(global_batch=256, iterations=100_000, deadline_hours=12, catalog=catalog)
    checked = srift.recommend(resnet50_profile, torch="2.13", **kw)
    unchecked = srift.recommend(resnet50_profile, torch="source", **kw)
    assert [_key(p) for p in [checked.best, *checked.alternatives]] == \
        [_key(p) for p in [unchecked.best, *unchecked.alternatives]]
    assert checked.best.cluster.groups[0].instance_type.startswith(("g5.", "g6e."))


# ---------------------------------------------------------------------------- CLI, export, sweep

def test_the_install_line_offers_pypis_build_else_the_newest_stable_one() -> None:
    from srift.torch_support import install_line, preferred_wheel

    # an A10G plan under 2.13 runs every variant: PyPI's CUDA 13.0 build, not the legacy 12.6 one
    # listed first (which the line had offered), nor the experimental 13.2 one
    assert preferred_wheel("2.13", ["cu126", "cu130", "cu132"]) == "cu130"
    assert install_line("2.13", ["cu126", "cu130", "cu132"]) == 'pip install "torch==2.13.*"  # cu130, PyPI\'s default build'
    # a V100 has the legacy build alone, from PyTorch's index
    assert install_line("2.13", ["cu126"]) == 'pip install "torch==2.13.*" --index-url https://download.pytorch.org/whl/cu126'
    assert preferred_wheel("2.14", ["cu126", "cu130", "cu132"]) == "cu132"  # 2.14 made 13.2 PyPI's
    assert preferred_wheel("2.11", ["cu126", "cu128", "cu130"]) == "cu130"  # two stable: the newer CUDA
    assert preferred_wheel("2.13", ["cu126", "cu132"]) == "cu126"            # legacy before experimental


def test_past_the_table_the_install_line_names_the_release_asked_for(resnet50_profile, catalog) -> None:
    # 2.16 is past the table: 2.15's wheels stand in, but the user installs 2.16 (had been 2.15)
    with pytest.warns(TorchSupportWarning, match="newer than srift's wheel table"):
        pred = srift.predict(resnet50_profile, "2x g5.2xlarge", 256, catalog=catalog, torch="2.16")
    assert pred.torch_release == "2.15" and pred.torch_version == "2.16"
    assert ts.describe(pred).endswith('pip install "torch==2.16.*"  # cu132, PyPI\'s default build')
    pred = srift.predict(resnet50_profile, "2x g5.2xlarge", 256, catalog=catalog, torch="2.13.0+cu126")
    assert ts.describe(pred).endswith('pip install "torch==2.13.*" --index-url https://download.pytorch.org/whl/cu126')


@pytest.mark.parametrize("support, message", [
    ("beta", r"releases\[0\]\.variants\[0\]\.support: expected one of default, stable, legacy, experimental"),
    (1, r"releases\[0\]\.variants\[0\]\.support"),
])
def test_a_wheel_support_level_is_checked(tmp_path, support, message) -> None:
    from srift.torch_support import TABLE_PATH, load_table

    doc = json.loads(TABLE_PATH.read_text())
    doc["releases"][0]["variants"][0]["support"] = support
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=message):
        load_table(path)


def test_one_default_wheel_per_release(tmp_path) -> None:
    from srift.torch_support import TABLE_PATH, load_table

    doc = json.loads(TABLE_PATH.read_text())
    for v in doc["releases"][-1]["variants"]:
        v["support"] = "default"
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=r"support: expected 'default' for one variant per release"):
        load_table(path)


def test_cli_torch_option_and_install_line(capsys, tmp_path, resnet50_profile) -> None:
    from srift.cli import main

    path = tmp_path / "p.json"
    resnet50_profile.save(path)
    code = main(["recommend", "--profile", str(path), "--global-batch", "1024", "--iterations", "100000",
                 "--regions", "us-east-1", "--types", ",".join(MIXED_TYPES), "--max-usd-per-hour", "300",
                 "--torch", "2.13", "--emit", "torchrun"])
    out = capsys.readouterr().out
    assert code == 0
    assert '# PyTorch: the official torch 2.13 wheels cu130, cu132 run every GPU of it: ' \
           'pip install "torch==2.13.*"  # cu130, PyPI\'s default build' in out
    code = main(["predict", "--profile", str(path), "--cluster", V100_B200, "--global-batch", "256",
                 "--torch", "2.13", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["torch_wheels"] == [] and "V100-16GB and B200 together" in doc["torch_note"]
    assert main(["predict", "--profile", str(path), "--cluster", "1x p3.16xlarge", "--global-batch", "256",
                 "--torch", "1.0"]) == 2
    assert "older than srift's wheel table" in capsys.readouterr().err


def test_sweep_specs_take_torch(tmp_path, resnet50_profile) -> None:
    from srift.sweep import parse_spec as parse, tasks

    resnet50_profile.save(tmp_path / "r50.json")

    def parse_spec(data):
        return parse(data, base_dir=tmp_path)

    base = {"models": [{"profile": "r50.json", "name": "r50"}], "global_batch": 256, "iterations": 1000,
            "constraints": [{"deadline": "12h"}]}
    assert all(t["torch"] == "2.15" for t in tasks(parse_spec({**base, "torch": "2.15"})))
    assert all("torch" not in t for t in tasks(parse_spec(copy.deepcopy(base))))   # older sweeps keep their keys
    with pytest.raises(ValueError, match=r"torch: expected a PyTorch version as a string.*got 2.1"):
        parse_spec({**base, "torch": 2.10})
    with pytest.raises(ValueError, match=r"torch: 'x' \(argument\)|torch: expected a PyTorch version"):
        parse_spec({**base, "torch": "x"})
