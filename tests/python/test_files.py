"""srift.files: what srift reads of a user's file, through every loader that uses it."""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from srift import files
from srift.catalog import Catalog
from srift.learn.loader import read_json
from srift.profile_data import Profile
from srift.sweep import load_spec

BOM = b"\xef\xbb\xbf"


def _loaders():
    cat = Catalog.default()
    return {
        "profile": Profile.load,
        "catalog": Catalog.load,
        "overrides": cat.with_overrides,
        "sweep spec": load_spec,
        "model": read_json,
    }


def test_a_byte_order_mark_is_not_part_of_the_text(tmp_path, resnet50_profile):
    profile = tmp_path / "p.json"
    profile.write_bytes(BOM + resnet50_profile.to_json().encode())
    assert Profile.load(profile).to_dict() == resnet50_profile.to_dict()

    overrides = {"schema": "srift.catalog-overrides/1", "gpus": {"T4": {"fp16_tflops": 50.0}}}
    for suffix, text in ((".json", json.dumps(overrides)),
                         (".toml", 'schema = "srift.catalog-overrides/1"\n[gpus.T4]\nfp16_tflops = 50.0\n'),
                         ("", json.dumps(overrides))):  # no suffix: JSON told by its "{" after the mark
        path = tmp_path / f"ov{suffix}"
        path.write_bytes(BOM + text.encode())
        assert Catalog.default().with_overrides(path).gpu("T4").fp16_tflops == 50.0

    catalog = tmp_path / "c.json"
    catalog.write_bytes(BOM + json.dumps(Catalog.default().to_dict()).encode())
    assert Catalog.load(catalog).gpu("T4").fp16_tflops == Catalog.default().gpu("T4").fp16_tflops


@pytest.mark.parametrize("loader", ["profile", "catalog", "overrides", "sweep spec", "model"])
def test_a_device_is_refused_without_reading_it(loader):
    # /dev/zero used to be read until memory ran out
    with pytest.raises(ValueError, match="not a regular file"):
        _loaders()[loader]("/dev/zero")


@pytest.mark.parametrize("loader", ["profile", "catalog", "overrides", "sweep spec", "model"])
def test_a_named_pipe_is_refused_without_blocking(loader, tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def load() -> None:
        try:
            _loaders()[loader](fifo)
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            outcome.append(exc)

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    worker.join(timeout=10)
    if worker.is_alive():  # open() of a pipe with no writer blocks: unblock it, then fail
        with open(fifo, "w"):
            pass
        pytest.fail(f"{loader} blocked on a named pipe")
    assert len(outcome) == 1 and isinstance(outcome[0], ValueError), outcome
    assert "not a regular file" in str(outcome[0])


def test_a_file_past_the_limit_is_refused(tmp_path, monkeypatch, resnet50_profile):
    path = tmp_path / "p.json"
    text = resnet50_profile.to_json()
    path.write_text(text)
    monkeypatch.setattr(files, "MAX_INPUT_BYTES", len(text) - 1)
    with pytest.raises(ValueError, match="larger than"):
        Profile.load(path)
    monkeypatch.setattr(files, "MAX_INPUT_BYTES", len(text))
    assert Profile.load(path).model == resnet50_profile.model


def test_read_input_bytes_raises_oserror_that_says_why(tmp_path):
    with pytest.raises(FileNotFoundError):
        files.read_input_bytes(tmp_path / "missing.json")
    with pytest.raises(IsADirectoryError, match="is a directory"):
        files.read_input_bytes(tmp_path)
    path = Path(tmp_path / "t.txt")
    path.write_bytes(BOM + "ok é".encode())
    assert files.read_input_text(path) == "ok é"
