"""Profile JSON format: round trip, schema errors with JSON paths, versions, measurements."""
from __future__ import annotations

import json
import re

import pytest

from srift.profile_data import (
    SCHEMA,
    BucketProfile,
    LayerProfile,
    Measurement,
    Profile,
    Timings,
    profile_schema,
)


def _profile(timed: bool = True) -> Profile:
    layers = [
        LayerProfile("embed", "Embedding", "embedding", 0.0, 0.0, 4096.0, 1_000_000, 1e-4 if timed else None,
                     2e-4 if timed else None),
        LayerProfile("block.fc", "Linear", "matmul", 2.0e6, 4.0e6, 8192.0, 262_656, 3e-4 if timed else None,
                     6e-4 if timed else None),
        LayerProfile("block", "Block", "elementwise", 0.0, 0.0, 12288.0, 0, 1e-5 if timed else None,
                     1e-5 if timed else None, pseudo=True),
        LayerProfile("head", "Linear", "matmul", 1.0e6, 2.0e6, 4096.0, 131_328, 2e-4 if timed else None,
                     4e-4 if timed else None),
    ]
    buckets = [
        BucketProfile(0, 1_393_984, ["head.bias", "head.weight", "block.fc.bias", "block.fc.weight"], 1, 0.55),
        BucketProfile(1, 1_000_000, ["embed.weight"], 0, 1.0),
    ]
    timings = Timings(
        batch_sizes=[8, 4], forward_s=[0.010, 0.006], backward_s=[0.020, 0.011], optimizer_s=0.002,
        iteration_s=[0.033, 0.019], forward_p10=[0.009, 0.005], forward_p90=[0.013, 0.008],
        backward_p10=[0.018, 0.010], backward_p90=[0.025, 0.014], repeats=10, warmup=3,
        iteration_p10=[0.03, 0.017], iteration_p90=[0.04, 0.022], optimizer_p10=0.0015, optimizer_p90=0.003,
        peak_memory_bytes=[None, None],
    ) if timed else None
    return Profile(
        model="tiny", device="cpu" if timed else "meta", precision="fp32", example_batch_size=8,
        param_count=598_496, param_bytes=2_393_984, trainable_param_bytes=2_393_984, optimizer="adam",
        optimizer_state_bytes=4_787_968, activation_bytes_per_sample=65536.0, layers=layers, buckets=buckets,
        timings=timings,
    )


def test_round_trip_save_load_is_equal(tmp_path):
    p = _profile()
    p.add_measurement("V100", 32, 0.25, forward_s=0.08, backward_s=0.15, source="paper")
    path = p.save(tmp_path / "p.json")
    q = Profile.load(path)
    assert q == p
    assert q.to_dict() == p.to_dict()
    assert json.loads(path.read_text())["schema"] == SCHEMA == "srift.profile/1"
    # a meta profile (null timings and times) round-trips too
    m = _profile(timed=False)
    assert Profile.load(m.save(tmp_path / "m.json")) == m


def test_helpers():
    p = _profile()
    assert p.total_forward_flops() == 3.0e6
    assert p.total_backward_flops() == 6.0e6
    assert p.gradient_bytes() == 2_393_984
    p.add_measurement("T4", 16, 0.5)
    p.add_measurement("t4 ", 32, 0.9, source="cluster")
    p.add_measurement("V100", 16, 0.2)
    assert [m.local_batch for m in p.measurements_for("T4")] == [16, 32]
    assert p.measurements_for("A100") == []


def _write(tmp_path, data) -> str:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.parametrize(
    "mutate, path, value",
    [
        (lambda d: d["layers"][3].__setitem__("forward_flops", -5), r"\$\.layers\[3\]\.forward_flops", "-5"),
        (lambda d: d["layers"][1].__setitem__("kind", "magic"), r"\$\.layers\[1\]\.kind", '"magic"'),
        (lambda d: d["buckets"][0].__setitem__("ready_fraction", 1.5), r"\$\.buckets\[0\]\.ready_fraction", "1.5"),
        (lambda d: d["timings"].__setitem__("repeats", "ten"), r"\$\.timings\.repeats", '"ten"'),
        (lambda d: d.__setitem__("precision", "fp8"), r"\$\.precision", '"fp8"'),
        (lambda d: d["layers"][0].pop("param_bytes"), r"\$\.layers\[0\]", "param_bytes"),
        (lambda d: d["buckets"][1].__setitem__("last_layer", 9), r"\$\.buckets\[1\]\.last_layer", "9"),
        (lambda d: d["timings"].__setitem__("forward_s", [0.1]), r"\$\.timings\.forward_s", "0.1"),
        (lambda d: d.__setitem__("surprise", 1), r"\$", "surprise"),
        (lambda d: d.__setitem__("buffer_broadcast_bytes", [4096, -1]), r"\$\.buffer_broadcast_bytes\[1\]", "-1"),
        (lambda d: d.__setitem__("forward_sync_buffers", "yes"), r"\$\.forward_sync_buffers", '"yes"'),
    ],
)
def test_schema_errors_name_the_json_path_and_value(tmp_path, mutate, path, value):
    data = _profile().to_dict()
    mutate(data)
    with pytest.raises(ValueError) as err:
        Profile.load(_write(tmp_path, data))
    msg = str(err.value)
    assert "bad.json" in msg
    assert re.search(path, msg), msg
    assert value in msg, msg


def test_unknown_schema_version_says_which_are_supported(tmp_path):
    data = _profile().to_dict()
    data["schema"] = "srift.profile/9"
    with pytest.raises(ValueError, match=r"unsupported profile schema 'srift\.profile/9'.*srift\.profile/1"):
        Profile.load(_write(tmp_path, data))
    del data["schema"]
    with pytest.raises(ValueError, match="supported versions: srift.profile/1"):
        Profile.from_dict(data)


def test_malformed_json_reports_line_and_column(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{\n  "schema": "srift.profile/1",\n  "model": oops\n}')
    with pytest.raises(ValueError, match=r"broken\.json: malformed JSON at line 3 column 12"):
        Profile.load(path)
    path.write_text('{"schema": "srift.profile/1", "x": NaN}')
    with pytest.raises(ValueError, match="non-finite"):
        Profile.load(path)
    with pytest.raises(ValueError, match="cannot read profile"):
        Profile.load(tmp_path / "missing.json")


def test_load_never_unpickles(tmp_path):
    import pickle

    path = tmp_path / "p.pkl"
    path.write_bytes(pickle.dumps({"schema": SCHEMA}))
    with pytest.raises(ValueError):
        Profile.load(path)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"device": "", "local_batch": 8, "iteration_s": 0.1}, "device"),
        ({"device": 3, "local_batch": 8, "iteration_s": 0.1}, "device"),
        ({"device": "T4", "local_batch": 0, "iteration_s": 0.1}, "local_batch"),
        ({"device": "T4", "local_batch": 2.5, "iteration_s": 0.1}, "local_batch"),
        ({"device": "T4", "local_batch": True, "iteration_s": 0.1}, "local_batch"),
        ({"device": "T4", "local_batch": 8, "iteration_s": -1.0}, "iteration_s"),
        ({"device": "T4", "local_batch": 8, "iteration_s": float("nan")}, "iteration_s"),
        ({"device": "T4", "local_batch": 8, "iteration_s": float("inf")}, "iteration_s"),
        ({"device": "T4", "local_batch": 8, "iteration_s": "fast"}, "iteration_s"),
        ({"device": "T4", "local_batch": 8, "iteration_s": 0.1, "forward_s": 0.0}, "forward_s"),
        ({"device": "T4", "local_batch": 8, "iteration_s": 0.1, "backward_s": -2}, "backward_s"),
        ({"device": "T4", "local_batch": 8, "iteration_s": 0.1, "forward_s": 0.2, "backward_s": 0.3}, "iteration_s"),
        ({"device": "T4", "local_batch": 8, "iteration_s": 0.1, "source": ""}, "source"),
        ({"device": "T4", "local_batch": 8, "iteration_s": 0.1, "precision": "fp16"}, "precision"),
        ({"device": "T4", "local_batch": 8, "iteration_s": 0.1, "precision": "half"}, "precision"),
        ({"device": "T4", "local_batch": 8, "iteration_s": 0.1, "precision": 2}, "precision"),
    ],
)
def test_add_measurement_validates(kwargs, field):
    p = _profile()
    with pytest.raises(ValueError) as err:
        p.add_measurement(**kwargs)
    assert str(err.value).startswith(f"{field}:"), str(err.value)
    assert p.measurements == []


def test_add_measurement_appends_and_serialises():
    p = _profile()
    m = p.add_measurement("Tesla V100-SXM2-16GB", 64, 0.31, forward_s=0.1, backward_s=0.2)
    assert isinstance(m, Measurement) and p.measurements == [m]
    assert m.recorded_at.endswith("Z") and m.source == "user"
    assert Profile.from_dict(json.loads(p.to_json())).measurements == [m]


def test_a_measurement_records_its_precision_and_old_files_read_as_the_profiles(tmp_path):
    """A measurement's precision (fp32, tf32, amp) round-trips; without one (files written
    before the field, add_measurement(precision=None)) it is the profile's, and the file keeps
    no field for it, as before."""
    p = _profile()
    p.add_measurement("T4", 16, 0.5)
    m = p.add_measurement("T4", 16, 0.3, precision="amp")
    data = p.to_dict()
    assert "precision" not in data["measurements"][0] and data["measurements"][1]["precision"] == "amp"
    q = Profile.load(p.save(tmp_path / "p.json"))
    assert q.measurements[1] == m and q.measurements[0].precision is None
    assert [q.measurement_precision(x) for x in q.measurements] == ["fp32", "amp"]
    data["measurements"][0]["precision"] = None  # null reads as absent
    assert Profile.load(_write(tmp_path, data)).measurements[0].precision is None
    data["measurements"][1]["precision"] = "fp16"
    with pytest.raises(ValueError, match=r"bad\.json: \$\.measurements\[1\]\.precision: invalid value \"fp16\""):
        Profile.load(_write(tmp_path, data))


def test_add_measurement_takes_a_precision_in_any_case_as_the_cli_does(tmp_path):
    """`--measure T4:16:0.3@AMP` was read as amp while add_measurement(precision="AMP") was
    refused: the API takes any case too, and records the lowercase name."""
    p = _profile()
    for given, kept in (("AMP", "amp"), ("Tf32", "tf32"), (" fp32 ", "fp32"), ("amp", "amp")):
        assert p.add_measurement("T4", 16, 0.3, precision=given).precision == kept
    assert [m.precision for m in Profile.load(p.save(tmp_path / "p.json")).measurements] == ["amp", "tf32", "fp32", "amp"]
    with pytest.raises(ValueError, match=r"^precision: expected one of fp32, tf32, amp.*got 'FP16'"):
        p.add_measurement("T4", 16, 0.3, precision="FP16")


def test_schema_is_draft_2020_12_and_self_consistent():
    import jsonschema

    schema = profile_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(_profile().to_dict())
    # every LayerProfile field is allowed by the schema (added fields are declared)
    assert set(LayerProfile.__dataclass_fields__) <= set(schema["$defs"]["layer"]["properties"])
    assert set(Timings.__dataclass_fields__) <= set(schema["$defs"]["timings"]["properties"])


def test_save_refuses_an_invalid_profile(tmp_path):
    p = _profile()
    p.layers[0].kind = "magic"
    with pytest.raises(ValueError, match=r"\$\.layers\[0\]\.kind"):
        p.save(tmp_path / "x.json")
    assert not (tmp_path / "x.json").exists()


def test_bucket_last_layer_null_reads_as_layer_0(tmp_path):
    """Older profilers wrote null for a bucket no layer owns; the engine reads last_layer as
    a number, so null is read as layer 0 (ready at the end of the backward), what the
    profiler writes now. Other non-integers are refused naming the bucket."""
    data = _profile().to_dict()
    data["buckets"][1]["last_layer"] = None
    assert Profile.load(_write(tmp_path, data)).buckets[1].last_layer == 0
    data["buckets"][1]["last_layer"] = "head"
    with pytest.raises(ValueError, match=r"bad\.json: \$\.buckets\[1\]\.last_layer: invalid value"):
        Profile.load(_write(tmp_path, data))


@pytest.mark.parametrize(
    "mutate, message",
    [
        # forward + backward far above the iteration they are part of (add_measurement's rule)
        (lambda m: m.update(iteration_s=0.1, forward_s=0.2, backward_s=0.3),
         r"\$\.measurements\[1\]\.iteration_s: 0\.1 is smaller than forward_s \+ backward_s"),
        (lambda m: m.update(recorded_at="yesterday"), r"\$\.measurements\[1\]\.recorded_at: .*'yesterday'"),
        (lambda m: m.update(recorded_at="2026-13-01T00:00:00Z"), r"\$\.measurements\[1\]\.recorded_at"),
        (lambda m: m.update(gpus=8, accumulation_steps=4), r"\$\.measurements\[1\]\.accumulation_steps: 4"),
        (lambda m: m.update(source=" "), r"\$\.measurements\[1\]\.source: .*' '"),
        (lambda m: m.update(device=" "), r"\$\.measurements\[1\]\.device: .*' '"),
        # absurd values the engine's fit would divide by ~0 or overflow on
        (lambda m: m.update(iteration_s=1e-308), r"\$\.measurements\[1\]\.iteration_s: expected seconds in"),
        (lambda m: m.update(local_batch=2**31), r"\$\.measurements\[1\]\.local_batch: expected at most 2147483647"),
    ],
)
def test_loaded_measurements_pass_the_checks_of_add_measurement(tmp_path, mutate, message):
    p = _profile()
    p.add_measurement("T4", 16, 0.5)
    p.add_measurement("V100", 32, 0.25, forward_s=0.08, backward_s=0.15)
    data = p.to_dict()
    mutate(data["measurements"][1])
    with pytest.raises(ValueError, match=r"bad\.json: " + message):
        Profile.load(_write(tmp_path, data))
    # and a profile holding such a measurement is not written either
    p.measurements[1] = Measurement(**data["measurements"][1])
    with pytest.raises(ValueError, match=message):
        p.save(tmp_path / "out.json")
    assert not (tmp_path / "out.json").exists()


def test_loaded_measurement_keeps_its_recorded_at(tmp_path):
    p = _profile()
    p.add_measurement("V100", 32, 0.25)
    data = p.to_dict()
    data["measurements"][0]["recorded_at"] = "2024-05-01T12:30:00+02:00"
    assert Profile.load(_write(tmp_path, data)).measurements[0].recorded_at == "2024-05-01T12:30:00+02:00"


@pytest.mark.parametrize("depth", [100_000, 5_000])
def test_deeply_nested_json_is_a_value_error_naming_the_file(tmp_path, depth):
    path = tmp_path / "deep.json"
    path.write_text('{"schema": "srift.profile/1", "model": ' + "[" * depth + "]" * depth + "}")
    with pytest.raises(ValueError, match=r"deep\.json: .*nested too deeply"):
        Profile.load(path)


def test_deeply_nested_dict_is_a_value_error():
    data = _profile().to_dict()
    inner: list = []
    data["layers"][0]["name"] = inner
    for _ in range(50_000):  # past the recursion limit of the schema validator
        inner.append([])
        inner = inner[0]
    with pytest.raises(ValueError, match=r"^\$: .*nested too deeply"):
        Profile.from_dict(data)


@pytest.mark.parametrize("key, value", [("forward_bytes", 1e308), ("forward_flops", 1e308), ("param_bytes", 10**20)])
def test_absurd_layer_sizes_are_refused_naming_the_field(key, value):
    # they reached the core as infinities ("log time of A10G must be finite, got -nan")
    data = _profile().to_dict()
    data["layers"][0][key] = value
    with pytest.raises(ValueError, match=rf"\$\.layers\[0\]\.{key}: invalid value .* greater than the maximum"):
        Profile.from_dict(data)


@pytest.mark.parametrize(("data", "message"), [
    ({"device": "A10G", "local_batch": 32}, r"measurement: missing iteration_s \(has device, local_batch\)"),
    ({}, "measurement: missing device, local_batch, iteration_s .has nothing."),
    (["A10G", 32, 0.2], "measurement: expected an object with device, local_batch and iteration_s"),
])
def test_measurement_from_dict_names_what_is_missing(data, message):
    # a bare TypeError (or KeyError) from the constructor used to come out
    with pytest.raises(ValueError, match=message):
        Measurement.from_dict(data)


def test_buffer_broadcast_fields_round_trip_and_default_to_ddps(tmp_path):
    """forward_sync_buffers and the broadcast's messages survive a save; a profile without them
    (written before srift recorded them) reads as DDP's default, its buffers one message."""
    p = _profile()
    p.buffer_bytes = 4104
    p.buffer_broadcast_bytes = [4096, 8]
    p.forward_sync_buffers = False
    q = Profile.load(p.save(tmp_path / "p.json"))
    assert q == p and q.broadcast_bytes() == []
    q.forward_sync_buffers = True
    assert q.broadcast_bytes() == [4096.0, 8.0]
    old = p.to_dict()
    del old["buffer_broadcast_bytes"], old["forward_sync_buffers"]
    legacy = Profile.load(_write(tmp_path, old))
    assert legacy.forward_sync_buffers is True and legacy.buffer_broadcast_bytes is None
    assert legacy.broadcast_bytes() == [4104.0]
    for bad in (-5, float("nan"), "8"):  # built in Python, past the schema: named as the profile's field
        legacy.buffer_broadcast_bytes = [8, bad]
        with pytest.raises(ValueError, match=r"buffer_broadcast_bytes\[1\]"):
            legacy.broadcast_bytes()


# ---- bounds: numbers past any model are refused at load, naming the field -------------------


def _write_text(tmp_path, text) -> str:
    path = tmp_path / "bad.json"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    "mutate, path, shown",
    [
        # huge integers loaded, then crashed predict (ZeroDivisionError, OverflowError) or
        # priced a sample at 1e20 dollars
        (lambda d: d.update(param_count=10**400, allreduce_dtype="fp16"), r"\$\.param_count", "10000000000"),
        (lambda d: d.update(param_count=10**30), r"\$\.param_count", "1000000000000000000000000000000"),
        (lambda d: d.update(buffer_broadcast_bytes=[10**400]), r"\$\.buffer_broadcast_bytes\[0\]", "10000000000"),
        (lambda d: d.update(buffer_broadcast_bytes=[8, 10**30]), r"\$\.buffer_broadcast_bytes\[1\]", "1000000000"),
        (lambda d: d.update(example_batch_size=2**40), r"\$\.example_batch_size", str(2**40)),
        (lambda d: d["timings"].update(repeats=10**20), r"\$\.timings\.repeats", str(10**20)),
        (lambda d: d["timings"].update(peak_memory_bytes=[10**20, None]), r"\$\.timings\.peak_memory_bytes\[0\]",
         str(10**20)),
        # timings loaded unbounded: predictions of 2.4e300 s, or an error naming a measurement
        (lambda d: d["timings"].update(iteration_s=[1e300, 0.019]), r"\$\.timings\.iteration_s\[0\]", "1e+300"),
        (lambda d: d["timings"].update(iteration_s=[0.033, 1e-300]), r"\$\.timings\.iteration_s\[1\]", "1e-300"),
        (lambda d: d["timings"].update(iteration_s=[0, 0.019]), r"\$\.timings\.iteration_s\[0\]", "0"),
        (lambda d: d["timings"].update(optimizer_s=1e300), r"\$\.timings\.optimizer_s", "1e+300"),
        (lambda d: d["layers"][2].update(forward_s=1e300), r"\$\.layers\[2\]\.forward_s", "1e+300"),
        (lambda d: d.update(bucket_cap_mb=1e300), r"\$\.bucket_cap_mb", "1e+300"),
        (lambda d: d.update(first_bucket_mb=1e-300), r"\$\.first_bucket_mb", "1e-300"),
        # every parameter element takes at least a byte
        (lambda d: d.update(param_count=10**15), r"\$\.param_count",
         "1000000000000000: more parameters than param_bytes"),
        # DDP buckets every trainable gradient at most once: 100x the bytes made the allreduce
        # 100x what the model sends (fewer is legal: parameters DDP is told to ignore)
        (lambda d: [b.update(bytes=b["bytes"] * 100) for b in d["buckets"]],
         r"\$\.buckets", "more than trainable_param_bytes"),
    ],
)
def test_numbers_past_any_model_are_refused_naming_the_field(tmp_path, mutate, path, shown):
    data = _profile().to_dict()
    mutate(data)
    with pytest.raises(ValueError) as err:
        Profile.load(_write(tmp_path, data))
    msg = str(err.value)
    assert re.search(r"bad\.json: " + path + ": invalid value", msg), msg
    assert shown in msg and len(msg) < 300, msg


@pytest.mark.parametrize("key, where", [
    ("bucket_cap_mb", r"\$\.bucket_cap_mb"),
    ("optimizer_s", r"\$\.timings\.optimizer_s"),
    ("iteration_s", r"\$\.timings\.iteration_s\[0\]"),
])
def test_a_number_past_a_double_is_refused_naming_the_field(tmp_path, key, where):
    """JSON reads 1e400 as infinity, which loaded; predictions then failed naming a
    measurement the file does not have, and saving failed naming no field."""
    text = json.dumps(_profile().to_dict())
    value = {"bucket_cap_mb": "25", "optimizer_s": "0.002", "iteration_s": "[0.033"}[key]
    assert text.count(f'"{key}": {value}') == 1
    text = text.replace(f'"{key}": {value}', f'"{key}": {value[:1] if value[0] == "[" else ""}1e400')
    with pytest.raises(ValueError, match=r"bad\.json: " + where + ": invalid value inf: not a finite number"):
        Profile.load(_write_text(tmp_path, text))
    p = _profile()
    p.bucket_cap_mb = float("inf")
    with pytest.raises(ValueError, match=r"^\$\.bucket_cap_mb: invalid value inf"):
        p.save(tmp_path / "out.json")


def test_every_numeric_field_of_the_schema_is_bounded():
    """Each number a profile holds has a maximum (or a cross-field rule), so none can overflow
    the engine's arithmetic; measurements are bounded by Measurement's own checks."""
    schema = profile_schema()

    def unbounded(node, path):
        if isinstance(node, dict):
            if node.get("type") in ("integer", "number") or node.get("type") in (["number", "null"],
                                                                                 ["integer", "null"]):
                if "maximum" not in node:
                    yield path
            for k, v in node.items():
                yield from unbounded(v, f"{path}/{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                yield from unbounded(v, f"{path}/{i}")

    found = [p for p in unbounded(schema, "") if "/measurement/" not in p]
    # bucket indices equal their position and last_layer indexes the layers (cross-field rules)
    assert found == ["/$defs/bucket/properties/index", "/$defs/bucket/properties/last_layer"]


# ---- what a compression hook sends: each bucket's own elements ------------------------------


def test_allreduce_bytes_come_from_each_buckets_own_elements(tmp_path):
    """A bucket records its gradient elements (numel); a comm hook sends numel x 2 bytes, so
    a bf16 bucket sends its own size and an fp32 one half, whatever the frozen parameters
    are. A profile from before numel scales by the mean element size, as it did."""
    p = _profile()
    p.allreduce_dtype = "fp16"
    p.param_bytes = p.trainable_param_bytes = 2_393_984 + 2_000_000  # + a frozen bf16 million
    p.param_count = 598_496 + 1_000_000
    p.buckets[0].numel = 1_393_984 // 4
    p.buckets[1].numel = 1_000_000 // 2  # a bf16 embedding
    assert p.allreduce_bucket_bytes() == [1_393_984 / 2, 1_000_000.0]
    q = Profile.load(p.save(tmp_path / "p.json"))
    assert q == p and q.gradient_bytes() == 1_393_984 // 2 + 1_000_000
    old = p.to_dict()
    for b in old["buckets"]:
        del b["numel"]
    legacy = Profile.from_dict(old)
    mean = (2_393_984 + 2_000_000) / (598_496 + 1_000_000)
    assert legacy.buckets[0].numel is None
    assert legacy.allreduce_bucket_bytes() == pytest.approx([1_393_984 * 2 / mean, 1_000_000 * 2 / mean])
    bad = p.to_dict()
    bad["buckets"][1]["numel"] = 300_000  # 3.33 bytes per element
    with pytest.raises(ValueError, match=r"\$\.buckets\[1\]\.numel: invalid value 300000: bytes \(1000000\)"):
        Profile.from_dict(bad)


# ---- numpy scalars in add_measurement -------------------------------------------------------


def test_add_measurement_takes_numpy_scalars_as_python_numbers():
    np = pytest.importorskip("numpy")
    p = _profile()
    m = p.add_measurement("T4", np.int64(32), np.float32(0.25), forward_s=np.float64(0.05), gpus=np.int32(1),
                          accumulation_steps=np.int64(2))
    assert (m.local_batch, m.gpus, m.accumulation_steps) == (32, 1, 2)
    assert type(m.local_batch) is int and type(m.gpus) is int and type(m.iteration_s) is float
    assert m.iteration_s == pytest.approx(0.25) and type(m.forward_s) is float
    assert Profile.from_json(p.to_json()).measurements == [m]
    for bad in (np.float64(32.5), np.int64(0), np.float32("nan")):
        with pytest.raises(ValueError, match=r"^local_batch: expected a positive integer"):
            p.add_measurement("T4", bad, 0.25)


@pytest.mark.parametrize("field", ["local_batch", "gpus", "accumulation_steps"])
def test_huge_integer_counts_are_refused_naming_the_field(field):
    # float(10**400) raised a bare OverflowError
    kwargs = {"device": "T4", "local_batch": 8, "iteration_s": 0.1, field: 10**400}
    with pytest.raises(ValueError, match=rf"^{field}: expected at most 2147483647"):
        _profile().add_measurement(**kwargs)


@pytest.mark.parametrize("mutate, message", [
    (lambda p: setattr(p.layers[1], "forward_flops", -5.0), r"\$\.layers\[1\]\.forward_flops: invalid value -5\.0"),
    (lambda p: setattr(p, "activation_bytes_per_sample", float("nan")),
     r"\$\.activation_bytes_per_sample: invalid value nan"),
    (lambda p: setattr(p, "param_count", 10**30), r"\$\.param_count: invalid value 1000000000000000000000000000000"),
    (lambda p: setattr(p.layers[0], "kind", object()), r"a field holds what a profile file cannot"),
    (lambda p: setattr(p.buckets[1], "last_layer", 9), r"\$\.buckets\[1\]\.last_layer: invalid value 9"),
])
def test_a_profile_built_in_python_is_held_to_the_files_bounds(mutate, message):
    import srift

    profile = _profile(timed=False)
    srift.predict(profile, "1x g5.xlarge", 64)  # valid as built
    mutate(profile)
    with pytest.raises(ValueError, match=r"profile 'tiny': .*" + message):
        profile.validate()
    with pytest.raises(ValueError, match=message):  # every entry point builds an Engine, which checks
        srift.predict(profile, "1x g5.xlarge", 64)
    with pytest.raises(ValueError, match=message):
        srift.recommend(profile, global_batch=64, iterations=1000, deadline_hours=100)


def test_validate_reads_numpy_scalars_and_remembers_a_valid_content():
    import numpy as np

    profile = _profile(timed=False)
    profile.example_batch_size = np.int64(8)
    profile.activation_bytes_per_sample = np.float32(65536.0)
    profile.validate()
    digest = profile.__dict__["_valid_digest"]
    profile.validate()
    assert profile.__dict__["_valid_digest"] == digest
    profile.layers[1].forward_flops = -1.0  # an edit after a passing check is checked again
    with pytest.raises(ValueError, match=r"forward_flops"):
        profile.validate()
