"""srift profile/predict/recommend --model FILE.py:FACTORY: a user's own model on the command line."""
from __future__ import annotations

import json
import re
import textwrap

import pytest

from srift.cli import main

MODELS = textwrap.dedent('''
    import torch
    from torch import nn
    import torch.nn.functional as F


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(128, 256)
            self.fc2 = nn.Linear(256, 10)

        def forward(self, x):
            return self.fc2(torch.relu(self.fc1(x)))


    def build(batch_size):
        return Net(), (torch.randn(batch_size, 128), torch.randint(0, 10, (batch_size,))), F.cross_entropy


    def no_loss(batch_size):
        return Net(), (torch.randn(batch_size, 128), torch.randint(0, 10, (batch_size,)))


    def broken(batch_size):
        raise RuntimeError("no data here")


    def not_a_model(batch_size):
        return "model", (torch.randn(batch_size, 128), None)
''')


@pytest.fixture()
def models_file(tmp_path):
    path = tmp_path / "models.py"
    path.write_text(MODELS)
    return path


def test_profile_a_model_from_a_file(capsys, tmp_path, models_file):
    out = tmp_path / "p.json"
    assert main(["profile", "--model", f"{models_file}:build", "--device", "meta", "--batch-size", "16",
                 "-o", str(out), "--json"]) == 0
    doc = json.loads(out.read_text())
    assert doc["model"] == "models.build" and doc["example_batch_size"] == 16
    assert doc["param_count"] == 128 * 256 + 256 + 256 * 10 + 10
    # two Linear layers: 2 FLOPs per multiply-accumulate, per sample
    assert sum(layer["forward_flops"] for layer in doc["layers"]) == pytest.approx(2 * (128 * 256 + 256 * 10))
    capsys.readouterr()
    assert main(["predict", "--model", f"{models_file}:build", "--device", "meta", "--cluster", "1x g5.xlarge",
                 "--global-batch", "64", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["feasible"] is True


@pytest.mark.parametrize(("spec", "message"), [
    ("{f}:nope", r"models.py has no function 'nope' \(it defines Net, broken, build, no_loss, not_a_model\)"),
    ("{f}:broken", r"broken\(8\) failed: RuntimeError: no data here"),
    ("{f}:not_a_model", r"not_a_model\(8\)\[0\] must be a torch.nn.Module, got str"),
    ("{d}/missing.py:build", r"no such file"),
    ("{d}/bad.py:x", r"bad.py line 1: invalid syntax"),
    ("{f}:1x", r"'1x' is not a Python function name"),
])
def test_a_bad_model_file_is_one_line_naming_it(capsys, tmp_path, models_file, spec, message):
    (tmp_path / "bad.py").write_text("def x(:\n")
    arg = spec.format(f=models_file, d=tmp_path)
    assert main(["profile", "--model", arg, "--device", "meta"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("srift: error: ")]
    assert len(errors) == 1 and re.search(message, errors[0]), err


def test_an_unknown_zoo_name_points_to_the_file_form(capsys):
    assert main(["profile", "--model", "mymodel", "--device", "meta"]) == 2
    assert "FILE.py:FACTORY" in capsys.readouterr().err


HARD_MODELS = textwrap.dedent('''
    import threading
    import warnings

    import torch
    from torch import nn
    import torch.nn.functional as F


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(32, 64)
            self.fc2 = nn.Linear(64, 10)

        def forward(self, x):
            return self.fc2(torch.relu(self.fc1(x)))


    def _batch(batch_size):
        return torch.randn(batch_size, 32), torch.randint(0, 10, (batch_size,))


    def scripted(batch_size):
        return torch.jit.script(Net()), _batch(batch_size), F.cross_entropy


    def weight_norm(batch_size):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = nn.Sequential(nn.utils.weight_norm(nn.Linear(32, 64)), nn.ReLU(), nn.Linear(64, 10))
        return model, _batch(batch_size), F.cross_entropy


    def locked(batch_size):
        model = Net()
        model.stats_lock = threading.Lock()
        return model, _batch(batch_size), F.cross_entropy
''')


@pytest.mark.filterwarnings("ignore:`torch.jit.:DeprecationWarning")
@pytest.mark.parametrize(("factory", "device", "code", "message"), [
    # tracebacks before: hooks refused by a ScriptModule, deepcopy refusing the model
    ("scripted", "cpu", 2, r"model: it is a TorchScript module \(torch.jit.script\).*profile the eager nn.Module"),
    ("scripted", "meta", 2, r"model: it is a TorchScript module"),
    ("weight_norm", "meta", 0, None),
    ("locked", "meta", 0, None),
])
def test_models_that_gave_tracebacks_are_profiled_or_refused_in_one_line(capsys, tmp_path, factory, device, code,
                                                                          message):
    path = tmp_path / "hard.py"
    path.write_text(HARD_MODELS)
    out = tmp_path / "p.json"
    assert main(["profile", "--model", f"{path}:{factory}", "--device", device, "--batch-size", "4",
                 "--warmup", "1", "--repeats", "1", "-o", str(out)]) == code
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if message is None:
        assert json.loads(out.read_text())["param_count"] > 0
    else:
        errors = [line for line in err.splitlines() if line.startswith("srift: error: ")]
        assert len(errors) == 1 and re.search(message, errors[0]), err


DATA_DEPENDENT = textwrap.dedent('''
    import torch
    from torch import nn
    import torch.nn.functional as F


    class Clipped(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(32, 10)

        def forward(self, x):
            return self.fc(x / float(x.abs().max()))  # .item(): meta has no values to read


    def build(batch_size):
        return Clipped(), (torch.randn(batch_size, 32), torch.randint(0, 10, (batch_size,))), F.cross_entropy
''')


def test_without_a_gpu_questions_profile_user_models_on_meta_or_else_on_cpu(capsys, monkeypatch, tmp_path, models_file):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    argv = ["--cluster", "2x g4dn.12xlarge", "--global-batch", "64"]
    assert main(["predict", "--model", f"{models_file}:build", *argv]) == 0
    on_meta = capsys.readouterr()
    assert "on meta (FLOPs, bytes, DDP buckets" in on_meta.err and "on cpu" not in on_meta.err
    assert main(["predict", "--model", f"{models_file}:build", "--device", "cpu", *argv]) == 0
    assert capsys.readouterr().out == on_meta.out  # CPU timings change no GPU prediction

    path = tmp_path / "datadep.py"
    path.write_text(DATA_DEPENDENT)
    assert main(["predict", "--model", f"{path}:build", *argv]) == 0
    fell_back = capsys.readouterr()
    assert f"{path}:build does not run on meta" in fell_back.err and "profiling on cpu ..." in fell_back.err
    assert "2x g4dn.12xlarge" in fell_back.out
    assert main(["profile", "--model", f"{path}:build", "--device", "meta"]) == 2  # asked for meta: no fallback
