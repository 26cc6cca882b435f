"""srift.zoo ssd300: NVIDIA DeepLearningExamples SSD300 v1.1 (ResNet-50 backbone, 81 classes)."""
from __future__ import annotations

import itertools
import math

import pytest
import torch

import srift
import srift.zoo as zoo
from srift.zoo import ssd
from srift.zoo._common import BatchFactory

PARAMS = 22_894_902  # computed from ssd/model.py, see zoo.info("ssd300")["params_source"]


def n_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_meta_parameter_count() -> None:
    model, (images, (gloc, glabel)), _ = zoo.build("ssd300", 3, device="meta")
    assert n_params(model) == ssd.ssd300.params == ssd._param_count() == PARAMS
    assert zoo.info("ssd300")["params"] == PARAMS and zoo.info("ssd300")["input_shape"] == [3, 300, 300]
    # the reference's heads: [4, 6, 6, 6, 4, 4] boxes per cell, 4 and 81 outputs per box
    assert [c.out_channels for c in model.loc] == [16, 24, 24, 24, 16, 16]
    assert [c.out_channels for c in model.conf] == [324, 486, 486, 486, 324, 324]
    assert images.shape == (3, 3, 300, 300) and gloc.shape == (3, 4, 8732) and glabel.shape == (3, 8732)
    assert gloc.dtype == torch.float32 and glabel.dtype == torch.int64 and glabel.device.type == "meta"


def test_meta_forward_backward_shapes() -> None:
    model, (images, targets), loss_fn = zoo.build("ssd300", 2, device="meta")
    locs, confs = model(images)
    assert locs.shape == (2, 4, 8732) and confs.shape == (2, 81, 8732)
    loss = loss_fn((locs, confs), targets)
    assert loss.shape == () and loss.device.type == "meta"
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())


def test_default_boxes_match_reference_loop() -> None:
    # literal port of ssd/utils.py DefaultBoxes for dboxes300_coco()
    feat, steps = [38, 19, 10, 5, 3, 1], [8, 16, 32, 64, 100, 300]
    scales, ratios = [21, 45, 99, 153, 207, 261, 315], [[2], [2, 3], [2, 3], [2, 3], [2], [2]]
    boxes = []
    for k, s in enumerate(feat):
        fk = 300 / steps[k]
        sk1, sk2 = scales[k] / 300, scales[k + 1] / 300
        sizes = [(sk1, sk1), (math.sqrt(sk1 * sk2),) * 2]
        for a in ratios[k]:
            sizes += [(sk1 * math.sqrt(a), sk1 / math.sqrt(a)), (sk1 / math.sqrt(a), sk1 * math.sqrt(a))]
        for w, h in sizes:
            boxes += [((j + 0.5) / fk, (i + 0.5) / fk, w, h) for i, j in itertools.product(range(s), repeat=2)]
    ref = torch.tensor(boxes, dtype=torch.float).clamp_(min=0, max=1)
    assert ref.shape == (8732, 4) and torch.equal(ssd.dboxes300_coco(), ref)


def test_cpu_training_step() -> None:
    model, (images, (gloc, glabel)), loss_fn = zoo.build("ssd300", 2)
    positives = glabel > 0
    assert positives.sum(1).tolist() == [ssd.POSITIVES_PER_IMAGE] * 2
    assert glabel.min() >= 0 and glabel.max() <= 80
    # unmatched boxes carry the default box, so their encoded offsets are exactly zero
    encoded = ssd.Loss()._loc_vec(gloc)
    assert torch.all(encoded.permute(0, 2, 1)[~positives] == 0)
    out = model(images)
    loss = loss_fn(out, (gloc, glabel))
    assert loss.shape == () and math.isfinite(loss.item()) and loss.item() > 0
    loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


def test_batch_is_deterministic() -> None:
    state = torch.random.get_rng_state()

    def draw(seed: int) -> list[torch.Tensor]:
        images, (gloc, glabel) = ssd._batch(BatchFactory(torch.device("cpu"), seed), 2, {"seed": seed})
        return [images, gloc, glabel]

    a, b, c = draw(0), draw(0), draw(1)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not torch.equal(a[2], c[2]) and not torch.equal(a[0], c[0])


def test_profile_on_meta_counts_forward_flops() -> None:
    # batch 4: the profiler also runs half the batch, and the 1x1 map's BatchNorm needs > 1
    model, batch, loss_fn = zoo.build("ssd300", 4, device="meta")
    prof = srift.profile(model, batch, loss_fn, device="meta", name="ssd300")
    assert prof.param_count == PARAMS
    # hand count: backbone 27.04 + additional blocks 1.98 + heads 11.29 GFLOPs per image
    assert prof.total_forward_flops() == pytest.approx(40_301_812_224)
    kinds = {layer.name: layer.kind for layer in prof.layers}
    assert kinds["conf.0"] == kinds["loc.5"] == "conv"


def test_no_options_but_seed() -> None:
    with pytest.raises(ValueError, match="image_size"):
        zoo.build("ssd300", 1, device="meta", image_size=320)
