"""srift.zoo: every model builds, matches its published parameter count, and trains one step.

Large models are only ever built on the meta device, so the file stays fast on a small CPU.
"""
from __future__ import annotations

import json
import math
from typing import Any

import pytest
from conftest import n_params
import torch

import srift.zoo as zoo

# published parameter counts (source strings live in zoo.info(name)["params_source"])
PUBLISHED: dict[str, int] = {
    "resnet18_cifar": 11_173_962,  # kuangliu/pytorch-cifar ResNet18
    "resnet50": 25_557_032,  # torchvision
    "vgg16": 138_357_544,  # torchvision
    "bert_base": 108_893_186,  # HF BertForQuestionAnswering, bert-base-uncased
    "bert_large": 334_094_338,  # HF BertForQuestionAnswering, bert-large-uncased
    "gpt2": 124_439_808,  # HF gpt2, tied LM head
    "gpt2_large": 774_030_080,  # HF gpt2-large, tied LM head
    "yolov3": 61_949_149,  # yolov3.cfg, ultralytics model summary
    "deepspeech2": 86_618_400,  # deepspeech.pytorch V3 defaults (computed)
    "ncf": 31_832_577,  # MLPerf NCF on ml-20m (computed)
    "transformer_xl_base": 191_948_759,  # Lambda's NVIDIA Transformer-XL run, "#params" in its log
    "transformer_xl_large": 519_963_095,  # the same, large
    "ssd300": 22_894_902,  # NVIDIA SSD300 v1.1, ResNet-50 trunk (computed)
}
BERT_MODEL_WITH_POOLER = {"bert_base": 109_482_240, "bert_large": 335_141_888}

# small models with options that keep one CPU step quick
CPU_SMALL: dict[str, dict[str, Any]] = {
    "resnet18_cifar": {},
    "ncf": {},
    "deepspeech2": {"audio_seconds": 0.2},
    "bert_base": {"seq_len": 12},
    "gpt2": {"seq_len": 12},
}


@pytest.fixture(autouse=True)
def _one_thread(one_torch_thread) -> None:
    """Every test here on one intra-op thread (conftest.one_torch_thread)."""


def tensors(obj: Any) -> list[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in tensors(v)]
    if isinstance(obj, (tuple, list)):
        return [t for v in obj for t in tensors(v)]
    return []


def call(model: torch.nn.Module, inputs: Any) -> Any:
    if isinstance(inputs, dict):
        return model(**inputs)
    if isinstance(inputs, tuple):
        return model(*inputs)
    return model(inputs)


def test_names_cover_the_zoo() -> None:
    assert zoo.names() == sorted(PUBLISHED)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_meta_build_matches_published_count(name: str) -> None:
    model, (inputs, targets), loss_fn = zoo.build(name, 3, device="meta")
    assert n_params(model) == PUBLISHED[name]
    assert zoo.info(name)["params"] == PUBLISHED[name]
    assert all(p.device.type == "meta" for p in model.parameters())
    batch = tensors(inputs) + tensors(targets)
    assert batch and all(t.device.type == "meta" and t.shape[0] == 3 for t in batch)
    assert callable(loss_fn) and model.training


def test_ncf_ml1m_is_the_ncf_paper_config() -> None:
    # guoyang9/NCF (AdaptDL's example, trained in the Pollux/Sia profiles): factor_num 32,
    # num_layers 3 on MovieLens-1M, 6,040 users x 3,706 items; 1,602,657 parameters by hand.
    model, ((users, items), _), _ = zoo.build("ncf", 8, device="meta", dataset="ml-1m")
    assert n_params(model) == (6040 + 3706) * (32 + 128) + (256 * 128 + 128) + (128 * 64 + 64) + (64 * 32 + 32) + 65
    assert n_params(model) == 1_602_657 and users.shape == items.shape == (8,)


@pytest.mark.parametrize("name", sorted(BERT_MODEL_WITH_POOLER))
def test_bert_model_with_pooler_count(name: str) -> None:
    model, _, _ = zoo.build(name, 1, device="meta", head="classification")
    assert n_params(model.bert) == BERT_MODEL_WITH_POOLER[name]
    assert n_params(model) == zoo.info(name)["classification_params"]


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_meta_forward_backward(name: str) -> None:
    # profilers analyse shapes on meta; deepspeech2's LSTM is slow there, so keep audio short
    options = {"audio_seconds": 0.2} if name == "deepspeech2" else {}
    model, (inputs, targets), loss_fn = zoo.build(name, 2, device="meta", **options)
    loss = loss_fn(call(model, inputs), targets)
    assert loss.shape == () and loss.device.type == "meta"
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())


@pytest.fixture(scope="module")
def cpu_step() -> dict[str, dict[str, Any]]:
    """Facts from the CPU training steps for later tests (building twice costs seconds)."""
    return {}


@pytest.mark.parametrize("name", sorted(CPU_SMALL))
def test_cpu_training_step(name: str, cpu_step: dict[str, Any]) -> None:
    model, (inputs, targets), loss_fn = zoo.build(name, 2, **CPU_SMALL[name])
    assert all(t.shape[0] == 2 for t in tensors(inputs) + tensors(targets))
    loss = loss_fn(call(model, inputs), targets)
    assert loss.shape == () and math.isfinite(loss.item()) and loss.item() > 0
    loss.backward()
    # every parameter takes part, so DDP needs no find_unused_parameters
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
    cpu_step[name] = {"batch": (inputs, targets), "tied": _tied(model)}


def _tied(model: torch.nn.Module) -> bool | None:
    head = getattr(model, "lm_head", None)
    return None if head is None else head.weight is model.transformer.wte.weight


def test_builds_are_deterministic_and_leave_global_rng_alone() -> None:
    state = torch.random.get_rng_state()
    m1, (x1, y1), _ = zoo.build("resnet18_cifar", 2)
    m2, (x2, y2), _ = zoo.build("resnet18_cifar", 2)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert all(torch.equal(a, b) for a, b in zip(m1.state_dict().values(), m2.state_dict().values()))
    assert torch.equal(x1, x2) and torch.equal(y1, y2)
    _, (x3, _), _ = zoo.build("resnet18_cifar", 2, seed=1)
    assert not torch.equal(x1, x3)


def test_gpt2_targets_are_shifted_inputs_and_head_is_tied(cpu_step: dict[str, Any]) -> None:
    if "gpt2" in cpu_step:
        batch, tied = cpu_step["gpt2"]["batch"], cpu_step["gpt2"]["tied"]
    else:  # run on its own
        model, batch, _ = zoo.build("gpt2", 2, **CPU_SMALL["gpt2"])
        tied = _tied(model)
    inputs, targets = batch
    assert inputs.shape == targets.shape == (2, CPU_SMALL["gpt2"]["seq_len"])
    assert torch.equal(inputs[:, 1:], targets[:, :-1])
    assert tied


def test_yolov3_heads_and_targets_share_shapes() -> None:
    model, (images, targets), loss_fn = zoo.build("yolov3", 2, device="meta")
    out = model(images)
    assert [tuple(o.shape) for o in out] == [(2, 255, 13, 13), (2, 255, 26, 26), (2, 255, 52, 52)]
    assert [t.shape for t in targets] == [o.shape for o in out]


def test_info_is_json_ready() -> None:
    for name in zoo.names():
        info = zoo.info(name)
        json.dumps(info)
        assert info["sample_unit"] in {"images", "sequences", "tokens", "utterances", "samples"}
        assert info["params_source"] and info["source"] and info["task"] and info["input_shape"]
    assert zoo.info("gpt2")["input_shape"] == [1024]
    assert zoo.info("bert_base")["input_shape"] == [384]


def test_unknown_name_suggests_nearest() -> None:
    with pytest.raises(ValueError, match=r"'resnet5'.*resnet50"):
        zoo.build("resnet5", 2)
    with pytest.raises(ValueError, match="gpt2_large"):
        zoo.info("gpt2-large")


@pytest.mark.parametrize("batch_size", [0, -1, 2.0, True])
def test_bad_batch_size(batch_size: Any) -> None:
    with pytest.raises(ValueError, match="batch_size"):
        zoo.build("ncf", batch_size)


@pytest.mark.parametrize(
    ("name", "options", "fragment"),
    [
        ("gpt2", {"seq_lenn": 8}, "seq_lenn"),
        ("gpt2", {"seq_len": 2048}, "seq_len"),
        ("bert_base", {"seq_len": 513}, "seq_len"),
        ("bert_base", {"head": "mlm"}, "head"),
        ("yolov3", {"image_size": 400}, "multiple of 32"),
        ("resnet50", {"image_size": "224"}, "image_size"),
        ("ncf", {"seed": 1.5}, "seed"),
        ("ncf", {"dataset": "ml-100k"}, "dataset"),
    ],
)
def test_bad_options(name: str, options: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        zoo.build(name, 1, device="meta", **options)
