"""The CLI's tables, --explain, --plot, --emit and sweep, as a user runs them."""
from __future__ import annotations

import json
import math
import shlex
import struct

import pytest
import yaml

from srift.cli import main

TYPES = "g4dn.xlarge,g5.xlarge,g5.12xlarge,p3.8xlarge"


@pytest.fixture()
def prof(tmp_path, resnet50_profile):
    return str(resnet50_profile.save(tmp_path / "p.json"))


def _recommend(prof, *extra):
    return main(["recommend", "--profile", prof, "--global-batch", "256", "--iterations", "100000",
                 "--deadline", "12h", "--types", TYPES, *extra])


def test_recommend_table_why_and_explain(capsys, prof):
    assert _recommend(prof, "--explain") == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("#"))
    for col in ("type", "market", "region", "count", "time (p10-p90)", "total", "samples/s", "per 1k samples"):
        assert col in header
    why = next(line for line in out.splitlines() if line.startswith("why: "))
    assert "cheaper than" in why and "because" in why
    for needle in ("exposed comm", "optimizer", "bottleneck link:", "headroom", "where the time goes"):
        assert needle in out
    assert "\x1b[" not in out  # plain when not a terminal


def test_recommend_json_has_the_why(capsys, prof):
    assert _recommend(prof, "--json") == 0
    data = json.loads(capsys.readouterr().out)
    assert data["found"] and "cheaper than" in data["why"]


def test_recommend_emit_torchrun(capsys, prof):
    assert _recommend(prof, "--emit", "torchrun", "--script", "train.py", "--script-args", "--epochs 2") == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line and not line.startswith("#")]
    assert lines and all("torchrun" in line and line.endswith("train.py --epochs 2") for line in lines)
    batches = sum(int(b) for line in lines for b in shlex.split(line)[0].split("=")[1].split(","))
    assert batches == 256


def test_recommend_emit_skypilot_to_file(capsys, prof, tmp_path):
    target = tmp_path / "task.yaml"
    assert _recommend(prof, "--emit", "skypilot", "--emit-to", str(target), "--name", "r50") == 0
    out = capsys.readouterr().out
    assert "best plan:" in out  # the table still printed
    docs = [d for d in yaml.safe_load_all(target.read_text()) if d]
    assert docs[0]["name"] == "r50"


def test_predict_plot_and_emit_json(capsys, prof, tmp_path):
    png = tmp_path / "t.png"
    assert main(["predict", "--profile", prof, "--cluster", "2x g5.12xlarge", "--global-batch", "256",
                 "--plot", str(png), "--emit", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["workers"] == 8 and len(data["launch"]["torchrun"]) == 2
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">I", png.read_bytes()[16:20])[0] == 1000


def test_pareto_plot(capsys, prof, tmp_path):
    png = tmp_path / "front.png"
    assert main(["pareto", "--profile", prof, "--global-batch", "256", "--iterations", "100000",
                 "--types", TYPES, "--regions", "us-east-1", "--plot", str(png)]) == 0
    captured = capsys.readouterr()
    assert "plans on the time-cost front" in captured.out and str(png) in captured.err
    assert struct.unpack(">II", png.read_bytes()[16:24]) == (1000, 600)


@pytest.mark.parametrize("argv, needle", [
    (["pareto", "--plot", "front.jpg"], ".png"),
    (["predict", "--emit-to", "x.sh"], "--emit-to needs --emit"),
    # a GPU the catalog does not know was silently ignored
    (["predict", "--measure", "A10GG:32:0.2"], "gpu = 'A10GG': unknown GPU key in the catalog; did you mean 'A10G'"),
    (["predict", "--emit", "torchrun", "--script", ""], "script must name the training script"),
    (["recommend", "--types", ""], "instance_types must name at least one instance type"),
    (["recommend", "--top", "5000"], "top_k must be an integer in 1..1000, got 5000"),
    (["replan", "--held", "1x g5.xlarge @eu-west-1", "--regions", "us-east-1"],
     "held instances run in eu-west-1, but regions is us-east-1"),
])
def test_user_errors_one_line(capsys, prof, argv, needle):
    cmd, *rest = argv
    question = ["--global-batch", "256", "--iterations", "1000", "--deadline", "12h"]
    base = {"pareto": ["--global-batch", "256", "--iterations", "1000", "--types", "g5.xlarge"],
            "predict": ["--cluster", "1x g5.xlarge", "--global-batch", "8"],
            "recommend": question, "replan": question}[cmd]
    assert main([cmd, "--profile", prof, *base, *rest]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and err[0].startswith("srift: error: ") and needle in err[0]
    assert err[1].startswith("hint: ")


def test_sweep_cli(capsys, tmp_path, prof):
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({"models": [{"profile": prof}], "global_batch": 64, "iterations": 1000,
                                    "constraints": [{"deadline": "1h"}], "types": TYPES.split(",")}))
    out = tmp_path / "r.csv"
    assert main(["sweep", str(spec), "-o", str(out), "--jobs", "0", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["computed"] == 1 and out.exists()
    assert main(["sweep", str(spec), "-o", str(out), "--jobs", "0"]) == 0
    assert "1 already there" in capsys.readouterr().out
    spec.write_text("models: [resnet50]\nglobal_batch: 8\niterations: 10\nconstraints: [{deadline: 1h}]\nmodel: x\n")
    assert main(["sweep", str(spec), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "key 'model' is unknown" in err and "Traceback" not in err
    assert main(["sweep", str(tmp_path / "missing.yaml")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_recommend_cautions_when_the_p90_time_is_past_the_deadline(capsys, prof):
    """The deadline holds for the predicted time; the CLI says so when the band reaches past it."""
    assert main(["recommend", "--profile", prof, "--global-batch", "256", "--iterations", "100000",
                 "--deadline", "12h", "--types", TYPES, "--json"]) == 0
    best = json.loads(capsys.readouterr().out)["best"]
    p = best["prediction"]
    p90_hours = best["total_hours"] * p["iteration_p90_s"] / p["iteration_s"]
    assert _recommend(prof) == 0
    out = capsys.readouterr().out
    cautions = [line for line in out.splitlines() if line.startswith("caution: ")]
    assert len(cautions) == (1 if p90_hours > 12 else 0)
    # a deadline far beyond the band: no caution
    deadline = f"{int(p90_hours * 3) + 24}h"
    assert main(["recommend", "--profile", prof, "--global-batch", "256", "--iterations", "100000",
                 "--deadline", deadline, "--types", TYPES]) == 0
    assert "caution:" not in capsys.readouterr().out


def test_catalog_show_of_an_unknown_family_is_an_error(capsys):
    assert main(["catalog", "show", "--family", "zzz"]) == 2
    err = capsys.readouterr().err
    assert "--family = 'zzz': no instance type in the catalog is of that family" in err and "p4d" in err


def test_json_output_is_strict_json(capsys, prof):
    """A search stopped before any plan has an unknown gap: null, not Infinity (which strict
    parsers refuse)."""
    assert main(["recommend", "--profile", prof, "--global-batch", "256", "--iterations", "1000",
                 "--deadline", "12h", "--time-limit", "1e-9", "--json"]) in (0, 3)
    text = capsys.readouterr().out

    def refuse(token):
        raise ValueError(f"non-JSON number {token}")

    doc = json.loads(text, parse_constant=refuse)
    assert doc["search"]["optimal"] is False


def test_every_json_output_is_strict_json(capsys, prof):
    """--emit json, catalog --json, sweep --json and validate --json go through one writer
    (srift.jsonout), which writes non-finite numbers as null."""
    from srift import jsonout

    assert jsonout.dumps({"a": math.inf, "b": [math.nan, 1.5], "c": (-math.inf,)}, indent=None) == \
        '{"a": null, "b": [null, 1.5], "c": [null]}'

    def refuse(token):
        raise ValueError(f"non-JSON number {token}")

    for argv in (["recommend", "--profile", prof, "--global-batch", "256", "--iterations", "1000",
                  "--deadline", "12h", "--types", TYPES, "--emit", "json"],
                 ["catalog", "show", "--family", "p3", "--json"]):
        assert main(argv) == 0
        json.loads(capsys.readouterr().out, parse_constant=refuse)


def test_a_closed_pipe_is_not_an_error(tmp_path, prof):
    import subprocess
    import sys

    # `srift catalog show ... | head -1`: the reader leaves before the output (over a pipe's
    # 64 KiB) is written; srift exits quietly with 141, as a SIGPIPE'd tool does
    cmd = f"{shlex.quote(sys.executable)} -m srift.cli catalog show --all --json | head -1"
    done = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True, timeout=120)
    assert done.stdout.count("\n") == 1
    assert done.stderr == "" and done.returncode == 141


def test_an_unavailable_device_fails_before_the_model_is_built(capsys, monkeypatch):
    from srift import zoo

    def never(*args, **kwargs):
        raise AssertionError("built the model before checking the device")

    monkeypatch.setattr(zoo, "build", never)
    assert main(["profile", "--model", "resnet50", "--device", "tpu"]) == 2
    assert "device: 'tpu' is not available here; available: cpu, meta" in capsys.readouterr().err


def test_confidence_needs_a_deadline(capsys, prof):
    assert main(["recommend", "--profile", prof, "--global-batch", "256", "--iterations", "1000",
                 "--budget", "100", "--confidence", "0.9"]) == 2
    assert "--confidence is the probability of meeting --deadline" in capsys.readouterr().err


@pytest.mark.parametrize("out, needle", [
    ("", "--out: expected a directory for the model JSON files, got an empty path"),
    ("FILE", "which is a file"),
    ("FILE/sub", "a parent is a file"),
])
def test_train_out_must_be_a_directory(capsys, tmp_path, out, needle):
    """`srift train --out ""` trained into the package's own models (a review): refused before
    any training, naming the option."""
    f = tmp_path / "FILE"
    f.write_text("x")
    arg = out.replace("FILE", str(f)) if out else out
    assert main(["train", "--out", arg]) == 2
    assert needle in capsys.readouterr().err


def test_measure_instance_format_names_an_instance(capsys):
    with pytest.raises(SystemExit):
        main(["predict", "--model", "resnet50", "--cluster", "1x g5.xlarge", "--global-batch", "8",
              "--measure-instance", "p3.16xlarge:32"])
    assert "INSTANCE:LOCAL_BATCH:SECONDS[@PRECISION] (e.g. p3.16xlarge:32:0.16" in capsys.readouterr().err


@pytest.mark.parametrize(("flag", "text", "expected"), [
    ("--measure", "T4:32:0.21", ("T4", 32, 0.21, 1, None)),
    ("--measure", "T4:32:1.7:8@amp", ("T4", 32, 1.7, 8, "amp")),
    ("--measure", "T4:32:0.21@TF32", ("T4", 32, 0.21, 1, "tf32")),
    ("--measure-instance", "p3.16xlarge:32:0.16@fp32", ("p3.16xlarge", 32, 0.16, "fp32")),
    ("--measure-instance", "p3.16xlarge:32:0.16", ("p3.16xlarge", 32, 0.16, None)),
])
def test_measure_flags_take_the_runs_precision_after_an_at(flag, text, expected):
    from srift.cli import build_parser

    args = build_parser().parse_args(["predict", "--model", "resnet50", "--cluster", "1x g5.xlarge",
                                      "--global-batch", "8", flag, text])
    assert (args.measure or args.measure_instance) == [expected]


@pytest.mark.parametrize("text", ["T4:32:0.21@fp16", "T4:32:0.21@", "T4:32@amp"])
def test_measure_with_an_unknown_precision_is_a_usage_error(capsys, text):
    with pytest.raises(SystemExit) as exc:
        main(["predict", "--model", "resnet50", "--cluster", "1x g5.xlarge", "--global-batch", "8",
              "--measure", text])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"got {text!r}" in err and ("fp32, tf32, amp" in err or "[@PRECISION]" in err)


def test_a_measured_run_at_another_precision_than_predicted_is_refused(capsys, tmp_path, resnet50_profile):
    """--precision amp read an FP32 run given on the same command line as an AMP one (a review).
    A run that says its precision is checked against the prediction's (--precision, else the
    profile's): one the prediction could not use is exit 2, naming both; a run without
    @PRECISION is taken at the predicted precision and recorded so."""
    path = tmp_path / "p.json"
    resnet50_profile.save(path)  # fp32
    base = ["predict", "--profile", str(path), "--cluster", "1x g4dn.xlarge", "--global-batch", "32", "--json"]
    assert main([*base, "--measure", "T4:32:0.21@fp32", "--precision", "amp"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("srift: error: --measure T4:32:0.21@fp32: a run timed at fp32 cannot anchor a "
                          "prediction at amp (--precision amp)")
    assert "--precision fp32" in err
    assert main([*base, "--measure-instance", "g4dn.12xlarge:32:0.3@amp"]) == 2
    assert "at amp cannot anchor a prediction at fp32 (the profile's precision, fp32)" in capsys.readouterr().err
    for extra in (["--measure", "T4:32:0.21@amp", "--precision", "amp"],
                  ["--measure", "T4:32:0.21", "--precision", "amp"],
                  ["--measure", "T4:32:0.21@fp32"], ["--measure", "T4:32:0.21"]):
        assert main([*base, *extra]) == 0
        out = capsys.readouterr()
        group = json.loads(out.out)["groups"][0]
        assert group["compute_source"] == "measured" and group["compute_s"] < 0.21, extra
        assert "not used" not in out.err


def test_a_refused_run_at_another_precision_is_echoed_as_given(capsys, tmp_path, resnet50_profile):
    """The refusal named T4:32:1.7:8@amp as "T4:32:1.7@amp": the micro-steps were dropped, so
    the value quoted was not the one given (a review)."""
    path = tmp_path / "p.json"
    resnet50_profile.save(path)  # fp32
    assert main(["predict", "--profile", str(path), "--cluster", "1x g4dn.xlarge", "--global-batch", "32",
                 "--measure", "T4:32:1.7:8@amp"]) == 2
    assert capsys.readouterr().err.startswith("srift: error: --measure T4:32:1.7:8@amp: a run timed at amp")


# ---- a new user's review (s8c-hB): every mistake one line and a hint --------------------------
def _run(argv):
    """main's exit code, whether it returns it or argparse exits with it."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def _one_line_and_a_hint(err):
    lines = err.strip().splitlines()
    assert len(lines) == 2, err
    assert lines[0].startswith(("srift: error: ", "srift predict: error: ", "srift recommend: error: ",
                                "srift replan: error: ")), err
    assert lines[1].startswith("hint: "), err
    return lines[0]


@pytest.mark.parametrize("extra, needle", [
    (["--global-batch", "0"], "argument --global-batch: expected a number >= 1, got '0'"),
    (["--global-batch", "2.5"], "argument --global-batch: expected a whole number, got '2.5'"),
    (["--global-batch", "8", "--measure", "T4:32"], "argument --measure: measurement must be GPU:LOCAL_BATCH"),
    (["--global-batch", "8", "--precision", "bf16"], "argument --precision: invalid choice: 'bf16'"),
])
def test_an_argument_argparse_refuses_is_one_line_and_a_hint(capsys, prof, extra, needle):
    """argparse printed its usage block (some 20 lines for predict) above the line that said
    what was wrong, and no hint, where the README promises one line and a hint."""
    assert _run(["predict", "--profile", prof, "--cluster", "1x g4dn.xlarge", *extra]) == 2
    first = _one_line_and_a_hint(capsys.readouterr().err)
    assert first.startswith("srift predict: error: ") and needle in first


def test_an_unquoted_cluster_is_named_with_the_quotes_it_needs(capsys, prof):
    """`--cluster 2x g4dn.12xlarge` left `g4dn.12xlarge` over: srift said "srift: error:
    unrecognized arguments" under the top-level usage, naming neither the command nor why."""
    assert _run(["predict", "--profile", prof, "--cluster", "2x", "g4dn.12xlarge", "--global-batch", "8"]) == 2
    err = capsys.readouterr().err
    first = _one_line_and_a_hint(err)
    assert first == "srift predict: error: unrecognized arguments: g4dn.12xlarge"
    assert 'needs quotes, e.g. --cluster "2x p3.16xlarge' in err
    assert _run(["replan", "--profile", prof, "--global-batch", "256", "--iterations", "1000", "--deadline", "12h",
                 "--held", "2x", "p3.16xlarge", "@us-east-1"]) == 2
    err = capsys.readouterr().err
    assert _one_line_and_a_hint(err) == "srift replan: error: unrecognized arguments: p3.16xlarge @us-east-1"
    assert '--held "2x p3.16xlarge @us-east-1"' in err
    assert _run(["predict", "--profile", prof, "--cluster", "1x g4dn.xlarge", "--global-batch", "8", "--frob"]) == 2
    assert "check the spelling" in capsys.readouterr().err


def test_cluster_text_in_capitals_or_with_commas(capsys, prof):
    """`:SPOT` and `--exclude P3.2XLARGE` are case-insensitive, but `2X G4DN.XLARGE` was "not of
    the form"; `a, b` did not say groups are joined with '+', nor which flag was wrong."""
    assert _run(["predict", "--profile", prof, "--cluster", "2X G4DN.XLARGE", "--global-batch", "8",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cluster"] == "2x g4dn.xlarge"
    assert _run(["predict", "--profile", prof, "--cluster", "2x g4dn.xlarge, 1x g5.xlarge",
                 "--global-batch", "8"]) == 2
    err = capsys.readouterr().err
    first = _one_line_and_a_hint(err)
    assert first.startswith("srift: error: --cluster '2x g4dn.xlarge, 1x g5.xlarge': ")
    assert "join groups with '+', not ','" in first and "(in cluster" not in first
    assert 'e.g. --cluster "2x p3.16xlarge + 4x g4dn.12xlarge:spot"' in err
    # --held is read before the profile is: a typo costs no profiling
    assert _run(["replan", "--model", "no-such-model", "--global-batch", "256", "--iterations", "1000",
                 "--deadline", "12h", "--held", "2x p3.16xlarge; 1x g5.xlarge"]) == 2
    assert _one_line_and_a_hint(capsys.readouterr().err).startswith("srift: error: --held '2x p3.16xlarge; ")


def test_measure_of_an_instance_type_or_measure_instance_of_a_gpu_says_which_flag(capsys, prof):
    """The tutorial times a run "e.g. on a g4dn.xlarge"; `--measure g4dn.xlarge:32:0.21` said
    "unknown GPU key" without a suggestion, and `--measure-instance T4:...` "unknown EC2 instance
    type". Each now names the other flag and the run as it should be written."""
    base = ["predict", "--profile", prof, "--cluster", "1x g4dn.12xlarge", "--global-batch", "32"]
    assert _run([*base, "--measure", "g4dn.xlarge:32:0.21"]) == 2
    err = capsys.readouterr().err
    assert "'g4dn.xlarge' is an instance type; --measure takes the GPU the run used (T4)" in _one_line_and_a_hint(err)
    assert "--measure T4:32:0.21" in err and "--measure-instance" not in err  # one GPU: no instance run to suggest
    assert _run([*base, "--measure", "g4dn.12xlarge:32:0.21"]) == 2
    assert "--measure-instance g4dn.12xlarge:32:0.21 for a DDP iteration on all its 4 GPUs" in capsys.readouterr().err
    assert _run([*base, "--measure-instance", "T4:32:0.21"]) == 2
    err = capsys.readouterr().err
    assert "'T4' is a GPU" in _one_line_and_a_hint(err) and "--measure T4:32:0.21" in err


def test_a_measured_value_out_of_range_names_the_flag(capsys, prof):
    """`--measure T4:32:1e-9` said "iteration_s: expected seconds in [1e-06, 1e+07]", not
    which flag or run."""
    base = ["predict", "--profile", prof, "--cluster", "1x g4dn.12xlarge", "--global-batch", "32"]
    assert _run([*base, "--measure", "T4:32:1e-9"]) == 2
    assert _one_line_and_a_hint(capsys.readouterr().err).startswith(
        "srift: error: --measure T4:32:1e-09: iteration_s: expected seconds")
    assert _run([*base, "--measure-instance", "g4dn.12xlarge:32:1e-9"]) == 2
    assert "--measure-instance g4dn.12xlarge:32:1e-09: iteration_s" in capsys.readouterr().err


def test_a_user_models_profiling_failure_names_the_model(capsys, tmp_path):
    """A factory whose batch, loss or forward the profiler refuses said "batch: expected
    (inputs, targets), got Tensor" with no word of which --model it was."""
    (tmp_path / "mine.py").write_text(
        "import torch\n"
        "def wrong(batch_size):\n"
        "    return torch.nn.Linear(4, 4), torch.randn(batch_size, 4)\n")
    spec = f"{tmp_path}/mine.py:wrong"
    assert _run(["predict", "--model", spec, "--cluster", "1x g4dn.xlarge", "--global-batch", "8"]) == 2
    err = capsys.readouterr().err
    assert f"srift: error: --model {spec!r}: batch: expected (inputs, targets), got Tensor" in err


def test_profile_summary_of_a_small_model_with_frozen_parameters(capsys, tmp_path):
    """A small model read "forward 0.00 GFLOP/sample ... activations 0.0 MiB/sample" and
    "1 DDP buckets (4 MiB)", and frozen parameters were counted with no word that DDP sends
    only the trainable ones."""
    (tmp_path / "small.py").write_text(
        "import torch\n"
        "from torch import nn\n"
        "def build(batch_size):\n"
        "    m = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))\n"
        "    m[0].requires_grad_(False)\n"
        "    return m, (torch.randn(batch_size, 512), torch.randint(0, 10, (batch_size,))), "
        "torch.nn.functional.cross_entropy\n")
    assert main(["profile", "--model", f"{tmp_path}/small.py:build", "--device", "meta"]) == 0
    out = capsys.readouterr().out
    assert "1.59 M parameters (4.0 MiB of 6.0 MiB trainable)" in out
    assert "1 DDP bucket (4.0 MiB)" in out
    assert "forward 3.17 MFLOP/sample, backward 2.14 MFLOP/sample, activations 8 KiB/sample" in out


def test_a_precision_the_gpu_has_no_units_for_is_noted(capsys, prof):
    """`--precision amp` on a K80 (p2) or `tf32` on a T4 was predicted without a word that the
    GPU has no FP16 or TF32 units; predict, --explain and recommend now say so."""
    base = ["predict", "--profile", prof, "--global-batch", "32"]
    assert main([*base, "--cluster", "1x p2.xlarge", "--precision", "amp"]) == 0
    assert "note: K80 has no FP16 units" in capsys.readouterr().out
    assert main([*base, "--cluster", "1x g4dn.xlarge + 1x g5.xlarge", "--precision", "tf32", "--explain"]) == 0
    out = capsys.readouterr().out
    assert "note: T4 has no TF32 units" in out and "A10G" not in out.split("note:")[1]
    for ok in (["--cluster", "1x g5.xlarge", "--precision", "tf32"], ["--cluster", "1x p2.xlarge"]):
        assert main([*base, *ok]) == 0
        assert "note:" not in capsys.readouterr().out
    assert main(["recommend", "--profile", prof, "--global-batch", "256", "--iterations", "1000", "--deadline", "12h",
                 "--precision", "tf32", "--types", "g4dn.xlarge"]) == 0
    assert "note: T4 has no TF32 units" in capsys.readouterr().out


def test_a_retired_type_asked_for_by_name_is_said_to_be_retired(capsys, prof):
    """`recommend --types p2.xlarge` answered "none of the 125 offers ... is of the types asked
    (p2.xlarge)" though the catalog prices it (predict uses the price): recommend and pareto
    plan current types only, and now say so for each retired type named."""
    argv = ["--profile", prof, "--global-batch", "256", "--iterations", "1000", "--types", "p2.xlarge,g4dn.xlarge"]
    assert main(["recommend", *argv, "--deadline", "12h"]) == 0
    err = capsys.readouterr().err
    assert "srift: warning: --types p2.xlarge: a retired (previous-generation) type, which recommend does not plan" in err
    assert "g4dn.xlarge" not in err
    assert main(["pareto", *argv]) == 0
    assert "which pareto does not plan" in capsys.readouterr().err


def test_search_and_launch_flags_refused_by_their_own_names(capsys, prof, tmp_path):
    """`--confidence 2` said "deadline_confidence must be ...", `--threads -1` "threads must be
    ...", the API's names; `--emit-to /missing/x.sh` was a bare "[Errno 2] No such file or
    directory" after the whole search."""
    base = ["--profile", prof, "--global-batch", "256", "--iterations", "1000", "--deadline", "12h"]
    for extra, needle in ((["--confidence", "2"], "srift recommend: error: argument --confidence: expected a "
                                                   "probability in [0.5, 1), e.g. 0.9, got '2'"),
                          (["--threads", "-1"], "srift recommend: error: argument --threads: expected 0"),
                          (["--emit", "torchrun", "--emit-to", str(tmp_path / "missing" / "x.sh")],
                           f"srift: error: --emit-to {str(tmp_path / 'missing' / 'x.sh')!r}: folder")):
        assert _run(["recommend", *base, *extra]) == 2
        assert _one_line_and_a_hint(capsys.readouterr().err).startswith(needle), extra
    assert _run(["predict", "--model", "no-such-model", "--cluster", "1x g5.xlarge", "--global-batch", "8",
                 "--emit", "json", "--emit-to", str(tmp_path / "missing" / "x.json")]) == 2
    assert "--emit-to" in capsys.readouterr().err  # before the model is looked up, let alone profiled
