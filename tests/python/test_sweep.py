"""srift sweep: spec validation, the table, resuming without recomputing, engines."""
from __future__ import annotations

import csv
import json
import re

import pytest

from srift.sweep import COLUMNS, load_spec, parse_spec, run_sweep, tasks

TYPES = ["g4dn.xlarge", "g5.xlarge", "g5.12xlarge"]


@pytest.fixture()
def spec_file(tmp_path, resnet50_profile):
    resnet50_profile.save(tmp_path / "r50.json")
    spec = {"models": [{"profile": "r50.json", "name": "r50"}], "global_batch": [64, 256],
            "iterations": 10000, "constraints": [{"deadline": "12h"}, {"budget": 50}],
            "regions": ["us-east-1", "us-west-2,eu-west-1"], "types": TYPES, "output": "out.csv"}
    path = tmp_path / "spec.yaml"
    import yaml

    path.write_text(yaml.safe_dump(spec))
    return path


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_spec_expands_to_every_combination(spec_file):
    spec = load_spec(spec_file)
    ts = tasks(spec)
    assert len(ts) == 1 * 2 * 2 * 2
    assert len({t["key"] for t in ts}) == len(ts)
    assert {t.get("deadline_hours") for t in ts} == {12.0, None}
    assert spec.output == str(spec_file.parent / "out.csv")


def test_sweep_writes_table_and_resumes_without_recomputing(spec_file):
    spec = load_spec(spec_file)
    first = run_sweep(spec, jobs=0, progress=False, limit=3)
    assert (first.computed, first.skipped, first.rows) == (3, 0, 3)
    out = spec_file.parent / "out.csv"
    before = _rows(out)
    assert list(before[0]) == COLUMNS
    seen = []
    second = run_sweep(spec, jobs=0, progress=False, on_row=seen.append)
    assert (second.computed, second.skipped, second.rows) == (5, 3, 8)
    assert not {r["key"] for r in before} & {r["key"] for r in seen}  # nothing recomputed
    after = _rows(out)
    assert after[:3] == before  # old rows untouched
    assert len({r["key"] for r in after}) == 8
    found = [r for r in after if r["found"] == "True"]
    assert found and all(float(r["total_usd"]) > 0 and r["plan"] for r in found)
    # the p10-p90 band of the whole run brackets its predicted time
    assert all(float(r["total_hours_p10"]) <= float(r["total_hours"]) <= float(r["total_hours_p90"]) for r in found)
    for r in after:
        if r["constraint"] == "deadline=12h" and r["found"] == "True":
            assert float(r["total_hours"]) <= 12
        if r["constraint"] == "budget=$50" and r["found"] == "True":
            assert float(r["total_usd"]) <= 50
    third = run_sweep(spec, jobs=0, progress=False)
    assert third.computed == 0 and third.skipped == 8


def test_confidence_constraint(tmp_path, resnet50_profile):
    """{deadline, confidence}: the deadline met with that probability; each row says how likely."""
    resnet50_profile.save(tmp_path / "r50.json")
    spec = parse_spec({"models": [{"profile": "r50.json", "name": "r50"}], "global_batch": 256,
                       "iterations": 100000, "constraints": [{"deadline": "12h"}, {"deadline": "12h", "confidence": 0.9}],
                       "regions": "us-east-1", "types": TYPES}, base_dir=tmp_path)
    run_sweep(spec, tmp_path / "c.csv", jobs=0, progress=False)
    plain, sure = sorted(_rows(tmp_path / "c.csv"), key=lambda r: r["constraint"])
    assert (plain["constraint"], sure["constraint"]) == ("deadline=12h", "deadline=12h confidence=0.9")
    assert sure["found"] == "True" and float(sure["deadline_probability"]) >= 0.9
    assert float(sure["total_hours_p90"]) <= 12 * (1 + 1e-9)  # on demand: the band's p90 run fits
    assert 0.5 <= float(plain["deadline_probability"]) <= 1
    assert float(sure["total_usd"]) >= float(plain["total_usd"])


def test_failed_rows_are_retried(tmp_path, spec_file):
    spec = load_spec(spec_file)
    out = tmp_path / "retry.csv"
    run_sweep(spec, out, jobs=0, progress=False, limit=2)
    rows = _rows(out)
    rows[0]["error"], rows[0]["found"] = "boom", "False"
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    seen = []
    run_sweep(spec, out, jobs=0, progress=False, limit=1, on_row=seen.append)
    assert [r["key"] for r in seen] == [rows[0]["key"]]
    assert all(not r["error"] for r in _rows(out))


def test_sweep_in_processes_matches_in_process(spec_file, tmp_path):
    spec = load_spec(spec_file)
    a = run_sweep(spec, tmp_path / "a.csv", jobs=0, progress=False, limit=4)
    b = run_sweep(spec, tmp_path / "b.csv", jobs=2, progress=False, limit=4)
    assert a.computed == b.computed == 4
    key = lambda r: r["key"]  # noqa: E731
    strip = lambda rows: [{k: v for k, v in r.items() if k != "search_s"} for r in sorted(rows, key=key)]  # noqa: E731
    assert strip(_rows(tmp_path / "a.csv")) == strip(_rows(tmp_path / "b.csv"))


def test_a_ray_worker_sets_up_again_for_another_sweeps_documents(monkeypatch):
    """A Ray worker process outlives one sweep: a task carrying another sweep's documents (their
    digest, `key`) sets the worker up again instead of answering with the last sweep's profiles,
    catalog and kept Engines; the in-process path lets go of them when the sweep ends."""
    from srift import sweep

    seen = []
    monkeypatch.setattr(sweep, "_worker_run", lambda t: seen.append((sorted(sweep._WORKER["profiles_raw"]),
                                                                     id(sweep._WORKER["engines"]))) or t)
    monkeypatch.setattr(sweep, "_WORKER", {})
    sweep._ray_run({"row": 1}, {"a": {}}, None, "first")
    sweep._ray_run({"row": 2}, {"a": {}}, None, "first")
    sweep._ray_run({"row": 3}, {"b": {}}, None, "second")
    assert [names for names, _ in seen] == [["a"], ["a"], ["b"]]
    assert seen[0][1] == seen[1][1] != seen[2][1]  # the same sweep keeps its Engines, the next does not
    assert list(sweep._execute([{"row": 4}], {"c": {}}, None, "local", 0, None)) == [{"row": 4}]
    assert sweep._WORKER == {}


def test_worker_rows_sharing_an_engine_match_rows_built_alone(tmp_path, resnet50_profile):
    """A worker keeps one Engine per model and config across its rows (srift.planning._Engines):
    every row is what a recommend call building its own Engine gives, measured GPUs and
    whole instances (their bands, warnings' inputs), accumulation and spot included."""
    import warnings

    from srift import sweep
    from srift.profile_data import Profile

    measured = Profile.from_dict(resnet50_profile.to_dict())
    measured.add_measurement("T4", local_batch=32, iteration_s=0.21)
    measured.add_measurement("p3.8xlarge", local_batch=64, iteration_s=0.3, gpus=4)
    resnet50_profile.save(tmp_path / "plain.json")
    measured.save(tmp_path / "measured.json")
    spec = parse_spec({"models": [{"profile": "plain.json"}, {"profile": "measured.json"}],
                       "global_batch": [256, 4096], "iterations": 10000,
                       "constraints": [{"deadline": "12h"}, {"deadline": "24h", "confidence": 0.9}, {"budget": 50}],
                       "regions": ["us-east-1"], "markets": ["on-demand", "on-demand,spot"], "types": TYPES,
                       "max_accumulation_steps": 4}, base_dir=tmp_path)
    todo = tasks(spec)
    profiles = {m.label: Profile.load(m.profile).to_dict() for m in spec.models}
    strip = lambda r: {k: v for k, v in r.items() if k != "search_s"}  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sweep._worker_init(profiles, None)
        shared = [strip(sweep._worker_run(t)) for t in todo]
        assert len(sweep._WORKER["engines"]._kept) == 2  # one per model: the rows' config is the same
        sweep._worker_init(profiles, None)
        alone = [strip(sweep.run_task(t, *sweep._worker_objects(t["model"]), threads=1)) for t in todo]
    assert not sweep._WORKER["engines"]._kept  # run_task alone builds an Engine per row
    assert shared == alone
    assert any(r["found"] for r in shared) and not any(r["error"] for r in shared)


@pytest.mark.parametrize("data, message", [
    ({"models": ["resnet50"], "global_batch": 64, "iterations": 10, "constraints": [{"deadline": "12h"}],
      "colour": 1}, "key 'colour' is unknown"),
    ({"models": ["resnet5"], "global_batch": 64, "iterations": 10, "constraints": [{"deadline": "1h"}]},
     "did you mean resnet50"),
    ({"models": ["resnet50"], "global_batch": 64, "iterations": 10, "constraints": [{"deadline": "soon"}]},
     r"constraints\[0\]\.deadline"),
    ({"models": ["resnet50"], "global_batch": 0, "iterations": 10, "constraints": [{"budget": 5}]},
     "global_batch must be a number > 0"),
    ({"models": ["resnet50"], "global_batch": 8, "iterations": 10}, "needs 'constraints'"),
    ({"models": ["resnet50"], "global_batch": 8, "iterations": 10, "constraints": [{"budget": 5, "confidence": 0.9}]},
     r"constraints\[0\]\.confidence: a confidence needs a deadline"),
    ({"models": ["resnet50"], "global_batch": 8, "iterations": 10, "constraints": [{"deadline": "2h", "confidence": 0.3}]},
     r"constraints\[0\]\.confidence must be a number in \[0.5, 1\), got 0.3"),
    ({"models": ["resnet50"], "global_batch": 8, "iterations": 10, "constraints": [{"budget": 5}],
      "markets": ["reserved"]}, r"markets\[0\]"),
])
def test_spec_errors_name_the_key(data, message):
    with pytest.raises(ValueError, match=message):
        parse_spec(data)


def test_output_errors(spec_file, tmp_path):
    spec = load_spec(spec_file)
    with pytest.raises(ValueError, match=r"\.csv or \.parquet"):
        run_sweep(spec, tmp_path / "out.xlsx", progress=False)
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        with pytest.raises(ValueError, match="pyarrow"):
            run_sweep(spec, tmp_path / "out.parquet", progress=False)
    bad = tmp_path / "other.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="columns"):
        run_sweep(spec, bad, progress=False)


def test_parquet_output(spec_file, tmp_path):
    pytest.importorskip("pyarrow", reason="Parquet output needs pyarrow, which is not installed here")
    import pyarrow.parquet as pq

    spec = load_spec(spec_file)
    run_sweep(spec, tmp_path / "o.parquet", jobs=0, progress=False, limit=2)
    again = run_sweep(spec, tmp_path / "o.parquet", jobs=0, progress=False)
    assert again.skipped == 2 and pq.read_table(tmp_path / "o.parquet").num_rows == 8


def test_ray_engine_on_a_local_ray_instance(spec_file, tmp_path, monkeypatch):
    ray = pytest.importorskip("ray", reason="ray is not installed here (pip install ray to run this test)")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        spec = load_spec(spec_file)
        result = run_sweep(spec, tmp_path / "ray.csv", engine="ray", progress=False, limit=4)
        local = run_sweep(spec, tmp_path / "local.csv", jobs=0, progress=False, limit=4)
    finally:
        ray.shutdown()
    assert result.engine == "ray" and result.computed == 4
    by_key = {r["key"]: r for r in _rows(tmp_path / "local.csv")}
    for r in _rows(tmp_path / "ray.csv"):
        assert r["plan"] == by_key[r["key"]]["plan"] and r["total_usd"] == by_key[r["key"]]["total_usd"]


def test_json_spec_is_accepted(tmp_path, resnet50_profile):
    resnet50_profile.save(tmp_path / "p.json")
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"models": [{"profile": "p.json"}], "global_batch": 64, "iterations": 100,
                                "constraints": [{"max_usd_per_hour": 5}], "types": TYPES}))
    spec = load_spec(path)
    assert spec.models[0].label == "p" and spec.constraints == [{"max_usd_per_hour": 5.0}]


_BASE = {"models": ["resnet50"], "global_batch": 8, "iterations": 10, "constraints": [{"budget": 5}]}


@pytest.mark.parametrize("extra, message", [
    # an empty axis makes the product empty: the sweep would write no row and say nothing
    ({"regions": []}, r"^regions must have at least one entry"),
    ({"markets": []}, r"^markets must have at least one entry"),
    ({"regions": ["us-east-1", ""]}, r"^regions\[1\] must name a region"),
    ({"types": []}, r"^types must name at least one instance type"),
    ({"schema": "srift.sweep/2"}, r"^schema: 'srift\.sweep/2' is not a sweep spec version .*srift\.sweep/1"),
    ({"regions": [[]]}, r"^regions\[0\] must name a region, several .*got \[\]$"),
    # refused when the spec is read, not row by row once the sweep runs
    ({"global_batch": [8, 2**31]}, r"^global_batch must be at most 2147483647"),
    ({"max_types": 17}, r"^max_types must be at most 16"),
    ({"max_instances_per_type": 2**40}, r"^max_instances_per_type must be at most 2147483647"),
    ({"max_accumulation_steps": 2**31}, r"^max_accumulation_steps must be at most"),
    ({"precision": "fp16"}, r"^precision must be one of fp32, tf32, amp"),
])
def test_spec_refuses_empty_axes_and_unknown_versions(extra, message):
    with pytest.raises(ValueError, match=message):
        parse_spec({**_BASE, **extra})


def test_spec_schema_key_is_optional_and_keeps_task_keys():
    plain = parse_spec({**_BASE, "regions": ["us-east-1", ["us-west-2", "eu-west-1"]]})
    versioned = parse_spec({**_BASE, "schema": "srift.sweep/1", "regions": ["us-east-1", "us-west-2,eu-west-1"]})
    assert versioned.regions == plain.regions == ["us-east-1", "us-west-2,eu-west-1"]
    ids = {"resnet50": {"zoo": "resnet50"}}  # no profiling: keys hash what the spec says
    assert [t["key"] for t in tasks(plain, ids)] == [t["key"] for t in tasks(versioned, ids)]


def test_spec_schema_null_reads_as_absent_like_every_other_key():
    assert parse_spec({**_BASE, "schema": None}).models == parse_spec(_BASE).models


@pytest.mark.parametrize("extra, message", [
    ({"regions": ["us-east-1", "us-esat-1"]}, r"^regions\[1\]: regions \['us-esat-1'\] are not in the catalog"),
    ({"types": ["g5.xlarge", "g5.xlarg"]}, r"^types: instance = 'g5.xlarg': unknown .*did you mean 'g5.xlarge'"),
    ({"exclude": ["p9.huge"]}, r"^exclude: instance = 'p9.huge': unknown"),
])
def test_sweep_refuses_names_the_catalog_lacks_before_profiling(tmp_path, monkeypatch, extra, message):
    import srift.sweep as sweep

    def no_profiling(*args, **kwargs):
        raise AssertionError("profiled before the names were checked")

    monkeypatch.setattr(sweep, "_profile_models", no_profiling)
    with pytest.raises(ValueError, match=message):
        run_sweep(parse_spec({**_BASE, **extra}), tmp_path / "out.csv", jobs=0, progress=False)


def test_spec_profile_that_is_a_directory(tmp_path):
    (tmp_path / "profiles").mkdir()
    with pytest.raises(ValueError, match=r"^models\[0\]\.profile: .*profiles is a directory, not a saved profile"):
        parse_spec({**_BASE, "models": [{"profile": "profiles"}]}, base_dir=tmp_path)


@pytest.mark.parametrize("model, message", [
    ({"profile": "r50.json", "name": [1, 2]}, r"^models\[0\]\.name must be a non-empty string .*got \[1, 2\]$"),
    ({"profile": "r50.json", "name": 0}, r"^models\[0\]\.name must be a non-empty string .*got 0$"),
    ({"profile": "r50.json", "name": float("nan")}, r"^models\[0\]\.name must be a non-empty string .*got nan$"),
    ({"profile": "r50.json", "name": " "}, r"^models\[0\]\.name must be a non-empty string .*got ' '$"),
    ({"profile": ["r50.json"]}, r"^models\[0\]\.profile must be a non-empty string \(a saved profile file\), "
                                r"got \['r50\.json'\]$"),
    ({"profile": None, "name": "r50"}, r"^models\[0\]\.profile must be a non-empty string .*got None$"),
])
def test_spec_model_name_and_profile_must_be_strings(tmp_path, resnet50_profile, model, message):
    """A list as a model's name was its str() as the rows' label ("[1, 2]" in the table), a name of
    0 read as absent (the file's stem); a profile that is no string a "does not exist" OSError."""
    resnet50_profile.save(tmp_path / "r50.json")
    with pytest.raises(ValueError, match=message):
        parse_spec({**_BASE, "models": [model]}, base_dir=tmp_path)
    # null stays an absent name: the file's stem labels the rows
    spec = parse_spec({**_BASE, "models": [{"profile": "r50.json", "name": None}]}, base_dir=tmp_path)
    assert [m.label for m in spec.models] == ["r50"]


def test_spec_file_errors_name_the_file(tmp_path):
    with pytest.raises(ValueError, match=r"sweep spec .*'.*specs': cannot read"):
        load_spec(tmp_path.joinpath("specs").mkdir() or tmp_path / "specs")
    deep = tmp_path / "deep.yaml"
    deep.write_text("models: " + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(ValueError, match=r"deep\.yaml: .*nested too deeply"):
        load_spec(deep)
    # nested aliases ("billion laughs") expanded a few lines past memory
    bomb = tmp_path / "bomb.yaml"
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    bomb.write_text("\n".join(lines) + "\nmodels: [resnet50]\ntypes: *a9\n")
    with pytest.raises(ValueError, match=r"bomb\.yaml: not valid YAML.*aliases \(\*name\) are not allowed"):
        load_spec(bomb)
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"models: [r\xe9snet50]\n")
    with pytest.raises(ValueError, match=r"latin\.yaml'?: not UTF-8"):
        load_spec(latin)


# ---- rows keyed by what determines them; resuming exactly once per key ---------------------------
_P3_OVERRIDES = ('schema = "srift.catalog-overrides/1"\n[[prices]]\ninstance = "p3.2xlarge"\nregion = "us-east-1"\n'
                 'market = "on-demand"\nusd_per_hour = {price}\n')


def test_editing_the_catalog_overrides_recomputes_their_rows(tmp_path, resnet50_profile):
    """Rows are keyed by the overrides' content, not their path: a new negotiated price in the
    same file gives new rows, not the old ones under the old price."""
    resnet50_profile.save(tmp_path / "r50.json")
    overrides = tmp_path / "ov.toml"
    overrides.write_text(_P3_OVERRIDES.format(price=3.06))
    spec = parse_spec({"models": [{"profile": "r50.json", "name": "r50"}], "global_batch": 64, "iterations": 1000,
                       "constraints": [{"budget": 100}], "regions": "us-east-1", "types": ["p3.2xlarge"],
                       "catalog_overrides": "ov.toml"}, base_dir=tmp_path)
    out = tmp_path / "ov.csv"
    run_sweep(spec, out, jobs=0, progress=False)
    assert float(_rows(out)[0]["usd_per_hour"]) == 3.06
    overrides.write_text(_P3_OVERRIDES.format(price=0.5))
    again = run_sweep(spec, out, jobs=0, progress=False)
    assert again.computed == 1
    assert [float(r["usd_per_hour"]) for r in _rows(out) if r["key"] == tasks(spec)[0]["key"]] == [0.5]


def test_cli_summary_leaves_out_rows_from_before_a_price_rise(tmp_path, resnet50_profile, capsys):
    """The old rows stay in the table under their old keys; the cheapest-plan summary is of this
    spec's rows, so a price rise does not leave the old, cheaper plan as the answer."""
    import yaml

    from srift import report
    from srift.cli import main

    resnet50_profile.save(tmp_path / "r50.json")
    overrides = tmp_path / "ov.toml"
    overrides.write_text(_P3_OVERRIDES.format(price=0.5))
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({"models": [{"profile": "r50.json", "name": "r50"}], "global_batch": 64,
                                    "iterations": 1000, "constraints": [{"budget": 100}], "regions": "us-east-1",
                                    "types": ["p3.2xlarge"], "catalog_overrides": "ov.toml"}))
    out = tmp_path / "s.csv"
    assert main(["sweep", str(spec), "-o", str(out), "--jobs", "0"]) == 0
    (cheap,) = _rows(out)
    overrides.write_text(_P3_OVERRIDES.format(price=3.06))
    capsys.readouterr()
    assert main(["sweep", str(spec), "-o", str(out), "--jobs", "0"]) == 0
    text = capsys.readouterr().out
    dear = next(r for r in _rows(out) if r["key"] != cheap["key"])
    assert report.usd(float(dear["total_usd"])) in text and report.usd(float(cheap["total_usd"])) not in text


def test_task_keys_follow_the_catalog_file_content(tmp_path):
    from srift.catalog import Catalog

    Catalog.default().save(tmp_path / "cat.json")
    spec = parse_spec({**_BASE, "catalog": "cat.json"}, base_dir=tmp_path)
    ids = {"resnet50": {"zoo": "resnet50"}}
    before = [t["key"] for t in tasks(spec, ids)]
    assert before == [t["key"] for t in tasks(spec, ids)]
    (tmp_path / "moved.json").write_bytes((tmp_path / "cat.json").read_bytes())
    moved = parse_spec({**_BASE, "catalog": "moved.json"}, base_dir=tmp_path)
    assert [t["key"] for t in tasks(moved, ids)] == before  # the content, not where it lies
    with (tmp_path / "cat.json").open("a") as f:
        f.write("\n")
    assert [t["key"] for t in tasks(spec, ids)] != before
    # no catalog: the keys of sweeps before content hashing stay as they were
    assert tasks(parse_spec(_BASE), ids)[0]["key"] == tasks(parse_spec(_BASE), ids)[0]["key"]


@pytest.mark.parametrize("key", ["catalog", "catalog_overrides"])
def test_missing_catalog_file_is_named_by_its_key(tmp_path, key):
    spec = parse_spec({**_BASE, key: "nope.json"}, base_dir=tmp_path)
    with pytest.raises(ValueError, match=rf"^{key} '.*nope\.json': cannot read \(No such file"):
        tasks(spec, {"resnet50": {"zoo": "resnet50"}})
    with pytest.raises(ValueError, match=rf"^{key} '.*nope\.json': cannot read"):
        run_sweep(spec, tmp_path / "out.csv", jobs=0, progress=False)


def _write_rows(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)


def test_resume_keeps_one_row_per_key_the_last(spec_file, tmp_path):
    """A table holding a key twice (a run killed between copying and converting) resumes with
    one row per key, the later copy."""
    spec = load_spec(spec_file)
    out = tmp_path / "dup.csv"
    run_sweep(spec, out, jobs=0, progress=False, limit=2)
    rows = _rows(out)
    later = [{**r, "search_s": "9.5"} for r in rows]
    _write_rows(out, rows + later)
    result = run_sweep(spec, out, jobs=0, progress=False, limit=0)
    assert (result.rows, result.skipped) == (2, 2)
    assert _rows(out) == later


def test_parquet_sweep_killed_mid_run_resumes_without_duplicates(spec_file, tmp_path, monkeypatch):
    pytest.importorskip("pyarrow", reason="Parquet output needs pyarrow, which is not installed here")
    import pyarrow.parquet as pq

    import srift.sweep as sweep

    spec = load_spec(spec_file)
    out = tmp_path / "k.parquet"
    run_sweep(spec, out, jobs=0, progress=False, limit=2)
    # killed (SIGKILL, the OOM killer): no `finally`, so the sidecar is never converted
    with monkeypatch.context() as m:
        m.setattr(sweep._Output, "finish", lambda self: self._file.close())
        run_sweep(spec, out, jobs=0, progress=False, limit=1)
    assert (tmp_path / "k.parquet.partial.csv").exists()
    result = run_sweep(spec, out, jobs=0, progress=False)
    keys = pq.read_table(out).column("key").to_pylist()
    assert (result.computed, result.skipped, result.rows) == (5, 3, 8)
    assert len(keys) == len(set(keys)) == 8


@pytest.mark.parametrize("extra, message", [
    ({"global_batch": [64, 128, 64]}, r"^global_batch\[2\] = 64 repeats global_batch\[0\]"),
    ({"iterations": [1000, "1e3"]}, r"^iterations\[1\] = '1e3' repeats iterations\[0\] = 1000"),
    ({"constraints": [{"deadline": "12h"}, {"deadline": "720m"}]},
     r"^constraints\[1\] = \{'deadline': '720m'\} repeats constraints\[0\] = \{'deadline': '12h'\}"),
    ({"regions": ["us-east-1,us-west-2", ["us-west-2", " us-east-1"]]}, r"^regions\[1\] = .* repeats regions\[0\]"),
    # region names are read case-insensitively: US-EAST-1 is the search us-east-1 is, and ALL is all
    ({"regions": ["us-east-1", "US-EAST-1"]}, r"^regions\[1\] = 'US-EAST-1' repeats regions\[0\] = 'us-east-1'"),
    ({"regions": ["all", "ALL"]}, r"^regions\[1\] = 'ALL' repeats regions\[0\] = 'all'"),
    ({"markets": ["spot,on-demand", "on-demand, spot"]}, r"^markets\[1\] = 'on-demand, spot' repeats markets\[0\]"),
    ({"models": ["resnet50", {"name": "resnet50"}]}, r"^models\[1\] = \{'name': 'resnet50'\} repeats models\[0\]"),
])
def test_repeated_axis_values_are_refused(extra, message):
    """Two equal entries of an axis are the same rows under one key: computed twice, counted
    twice in any total. Most likely a typo, so the spec is refused."""
    with pytest.raises(ValueError, match=message):
        parse_spec({**_BASE, **extra})


@pytest.mark.parametrize("cut", ["before_found", "after_found"])
def test_row_cut_mid_write_is_recomputed(spec_file, tmp_path, cut):
    """A crash or a full disk mid-write leaves the last row without its result columns: it is
    not done, so it is computed again and replaced."""
    spec = load_spec(spec_file)
    out = tmp_path / "cut.csv"
    run_sweep(spec, out, jobs=0, progress=False, limit=3)
    text = out.read_text().rstrip("\r\n")
    head, last = text.rsplit("\n", 1)
    out.write_text(head + "\n" + (last[:40] if cut == "before_found" else last[:-3]))
    cut_key = _rows(out)[-1]["key"]
    seen = []
    run_sweep(spec, out, jobs=0, progress=False, on_row=seen.append)
    assert cut_key in {r["key"] for r in seen}
    after = _rows(out)
    assert len(after) == len({r["key"] for r in after}) == 8
    assert all(r["found"] in ("True", "False") and r["error"] is not None for r in after)


@pytest.mark.parametrize("extra, message", [
    ({"top": 5}, r"^sweep spec key 'top' is unknown"),  # one plan per row: the table has no place for more
    ({"models": [{"profile": "r50.json", "batch_size": 32}]}, r"^models\[0\]\.batch_size: .*zoo model"),
    ({"models": [{"profile": "r50.json", "device": "cuda"}]}, r"^models\[0\]\.device: .*zoo model"),
])
def test_spec_keys_that_would_be_ignored_are_refused(tmp_path, resnet50_profile, extra, message):
    resnet50_profile.save(tmp_path / "r50.json")
    with pytest.raises(ValueError, match=message):
        parse_spec({**_BASE, **extra}, base_dir=tmp_path)


@pytest.mark.parametrize("extra, message", [
    ({"device": "cdua"}, r"^device: 'cdua' is not available here; available: cpu"),
    ({"models": [{"name": "resnet50", "device": "cdua"}]}, r"^models\[0\]\.device: 'cdua' is not available here"),
    ({"models": [{"name": "resnet50", "device": 0}]}, r"^models\[0\]\.device must be a device name .*got 0"),
    ({"models": [{"name": "resnet50", "device": "cuda:99"}]}, r"^models\[0\]\.device: 'cuda:99' is not available"),
])
def test_a_zoo_models_device_is_checked_when_the_spec_is_read(extra, message):
    # before, a typo surfaced only when the sweep reached the model, named as a bare `device`
    with pytest.raises(ValueError, match=message):
        parse_spec({**_BASE, **extra})


def test_a_zoo_models_device_that_is_here_is_kept():
    spec = parse_spec({**_BASE, "device": "meta", "models": ["resnet50", {"name": "bert_base", "device": "cpu"}]})
    assert [m.device for m in spec.models] == ["meta", "cpu"]


def test_parquet_columns_are_typed(spec_file, tmp_path):
    pytest.importorskip("pyarrow", reason="Parquet output needs pyarrow, which is not installed here")
    import pyarrow as pa
    import pyarrow.parquet as pq

    spec = load_spec(spec_file)
    out = tmp_path / "t.parquet"
    run_sweep(spec, out, jobs=0, progress=False, limit=3)
    table = pq.read_table(out)
    assert table.column_names == COLUMNS
    types = dict(zip(table.column_names, table.schema.types))
    assert types["found"] == pa.bool_()
    assert all(types[c] == pa.int64() for c in ("global_batch", "instances", "gpus", "evaluated"))
    assert all(types[c] == pa.float64() for c in ("iterations", "deadline_hours", "total_usd", "search_s"))
    assert all(types[c] == pa.string() for c in ("key", "model", "plan", "error"))
    rows = table.to_pylist()
    assert all(r["error"] is None for r in rows)  # missing values are nulls, not ""
    assert {r["deadline_hours"] for r in rows} <= {12.0, None} and None in {r["budget_usd"] for r in rows}
    found = [r for r in rows if r["found"]]
    assert found and all(r["total_usd"] > 0 and r["gpus"] >= 1 for r in found)
    # resuming reads the typed table back: nothing recomputed, the kept rows unchanged
    again = run_sweep(spec, out, jobs=0, progress=False)
    assert (again.computed, again.skipped) == (5, 3)
    after = pq.read_table(out)
    assert after.schema == table.schema and after.to_pylist()[:3] == rows


def test_sweep_help_names_every_spec_key(capsys):
    """`srift sweep --help` lists the spec's keys; it had left out ``torch`` (the PyTorch whose
    official wheels every plan must run), which the README's command table names."""
    from srift import sweep
    from srift.cli import main

    with pytest.raises(SystemExit):
        main(["sweep", "--help"])
    keys = " ".join(capsys.readouterr().out.split()).split("spec keys:", 1)[1]
    assert [k for k in sorted(sweep._SPEC_KEYS) if not re.search(rf"(?<![\w.]){k}(?![\w/])", keys)] == []
