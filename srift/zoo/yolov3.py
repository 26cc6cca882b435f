"""YOLOv3: Darknet-53 backbone and the three-scale YOLOv3 head, 80 COCO classes, 416x416.

Redmon & Farhadi, "YOLOv3: An Incremental Improvement", 2018. The layer list is that of
darknet's ``yolov3.cfg`` (as run by ultralytics/yolov3 and eriklindernoren/PyTorch-YOLOv3):
conv + BN (no bias) + LeakyReLU(0.1) everywhere except the three 1x1 detection convs, which
have a bias and no activation. 61,949,149 parameters, matching ultralytics' model summary.

The loss here is a simplified but real YOLO-style objective for profiling: objectness BCE over
every anchor cell, box regression (sigmoid xy, raw wh; MSE) and class BCE on the cells that
hold an object. Targets have the head's own shape, so no anchor matching runs on the host;
the compute and memory traffic of the real loss are small next to the network's either way.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from srift.zoo._common import BatchFactory, LossFn, Options, ZooEntry, check_range

__all__ = ["ENTRIES", "Darknet53", "YOLOv3", "yolov3"]

ANCHORS_PER_SCALE = 3


def conv_bn(cin: int, cout: int, k: int, stride: int = 1) -> nn.Sequential:
    """Darknet's [convolutional] with batch_normalize=1, pad=1, activation=leaky."""
    return nn.Sequential(
        nn.Conv2d(cin, cout, k, stride=stride, padding=(k - 1) // 2, bias=False),
        nn.BatchNorm2d(cout),
        nn.LeakyReLU(0.1, inplace=True),
    )


class Residual(nn.Module):
    """1x1 squeeze to half the channels, 3x3 back, [shortcut] from=-3."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = conv_bn(channels, channels // 2, 1)
        self.conv2 = conv_bn(channels // 2, channels, 3)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.conv2(self.conv1(x))


def _stage(cin: int, cout: int, blocks: int) -> nn.Sequential:
    return nn.Sequential(conv_bn(cin, cout, 3, stride=2), *(Residual(cout) for _ in range(blocks)))


class Darknet53(nn.Module):
    """The 52 conv layers of Darknet-53 (its classifier is not part of YOLOv3)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = conv_bn(3, 32, 3)
        self.stage1 = _stage(32, 64, 1)
        self.stage2 = _stage(64, 128, 2)
        self.stage3 = _stage(128, 256, 8)  # stride 8: routed to the small-object scale
        self.stage4 = _stage(256, 512, 8)  # stride 16: routed to the medium scale
        self.stage5 = _stage(512, 1024, 4)  # stride 32

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        c3 = self.stage3(self.stage2(self.stage1(self.stem(x))))
        c4 = self.stage4(c3)
        return c3, c4, self.stage5(c4)


def _neck(cin: int, mid: int) -> nn.Sequential:
    """Five alternating 1x1/3x3 convs ending at `mid` channels (the route point)."""
    return nn.Sequential(
        conv_bn(cin, mid, 1),
        conv_bn(mid, mid * 2, 3),
        conv_bn(mid * 2, mid, 1),
        conv_bn(mid, mid * 2, 3),
        conv_bn(mid * 2, mid, 1),
    )


def _detect(mid: int, outputs: int) -> nn.Sequential:
    return nn.Sequential(conv_bn(mid, mid * 2, 3), nn.Conv2d(mid * 2, outputs, 1, bias=True))


def _lateral(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(conv_bn(cin, cout, 1), nn.Upsample(scale_factor=2, mode="nearest"))


class YOLOv3(nn.Module):
    """Returns raw head maps (N, 3*(5+C), S, S) at strides 32, 16 and 8."""

    def __init__(self, num_classes: int = 80) -> None:
        super().__init__()
        out = ANCHORS_PER_SCALE * (5 + num_classes)
        self.num_classes = num_classes
        self.backbone = Darknet53()
        # registration follows execution: large objects first, then each upsampled branch
        self.neck_large = _neck(1024, 512)
        self.detect_large = _detect(512, out)
        self.lateral_medium = _lateral(512, 256)
        self.neck_medium = _neck(256 + 512, 256)
        self.detect_medium = _detect(256, out)
        self.lateral_small = _lateral(256, 128)
        self.neck_small = _neck(128 + 256, 128)
        self.detect_small = _detect(128, out)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        c3, c4, c5 = self.backbone(x)
        r = self.neck_large(c5)
        large = self.detect_large(r)
        r = self.neck_medium(torch.cat((self.lateral_medium(r), c4), dim=1))
        medium = self.detect_medium(r)
        r = self.neck_small(torch.cat((self.lateral_small(r), c3), dim=1))
        return large, medium, self.detect_small(r)


def _grids(size: int) -> tuple[int, int, int]:
    return size // 32, size // 16, size // 8


def _batch(factory: BatchFactory, batch_size: int, options: Options) -> tuple[Tensor, tuple[Tensor, ...]]:
    size, classes, per_image = options["image_size"], 80, options["objects_per_image"]
    images = factory.randn((batch_size, 3, size, size))
    channels = ANCHORS_PER_SCALE * (5 + classes)
    if factory.meta:
        return images, tuple(factory.empty((batch_size, channels, g, g), torch.float32) for g in _grids(size))
    # place `per_image` objects per image on random (scale, anchor, cell) slots
    n = batch_size * per_image
    b = torch.arange(batch_size).repeat_interleave(per_image)
    scale = factory.randint(0, 3, (n,)).cpu()
    anchor = factory.randint(0, ANCHORS_PER_SCALE, (n,)).cpu()
    where = factory.rand((n, 2)).cpu()
    cls = factory.randint(0, classes, (n,)).cpu()
    xy = factory.rand((n, 2)).cpu()
    wh = 0.5 * factory.randn((n, 2)).cpu()
    targets = []
    for s, g in enumerate(_grids(size)):
        t = torch.zeros((batch_size, ANCHORS_PER_SCALE, 5 + classes, g, g))
        sel = scale == s
        bi, ai, ci = b[sel], anchor[sel], cls[sel]
        yi, xi = (where[sel] * g).long().clamp_(max=g - 1).unbind(1)
        for k in range(2):
            t[bi, ai, k, yi, xi] = xy[sel][:, k]
            t[bi, ai, 2 + k, yi, xi] = wh[sel][:, k]
        t[bi, ai, 4, yi, xi] = 1.0
        t[bi, ai, 5 + ci, yi, xi] = 1.0
        targets.append(factory.cpu_tensor(t.view(batch_size, channels, g, g)))
    return images, tuple(targets)


def yolo_loss(output: tuple[Tensor, ...], targets: tuple[Tensor, ...]) -> Tensor:
    """Simplified YOLO loss for profiling (see the module docstring); no host syncs."""
    total = output[0].new_zeros(())
    for pred, target in zip(output, targets):
        n, ch, h, w = pred.shape
        p = pred.view(n, ANCHORS_PER_SCALE, ch // ANCHORS_PER_SCALE, h, w)
        t = target.view_as(p)
        obj = t[:, :, 4:5]
        positives = obj.sum().clamp(min=1.0)
        total = total + F.binary_cross_entropy_with_logits(p[:, :, 4], t[:, :, 4])
        box = (torch.sigmoid(p[:, :, 0:2]) - t[:, :, 0:2]).square() + (p[:, :, 2:4] - t[:, :, 2:4]).square()
        total = total + (box * obj).sum() / positives
        cls = F.binary_cross_entropy_with_logits(p[:, :, 5:], t[:, :, 5:], reduction="none")
        total = total + (cls * obj).sum() / (positives * (ch // ANCHORS_PER_SCALE - 5))
    return total


def _loss(options: Options) -> LossFn:
    return yolo_loss


def _validate(options: Options) -> None:
    check_range("image_size", options["image_size"], 64, 1536)
    if options["image_size"] % 32:
        raise ValueError(f"option image_size must be a multiple of 32, got {options['image_size']!r}")
    check_range("objects_per_image", options["objects_per_image"], 0, 100)


yolov3 = ZooEntry(
    name="yolov3",
    family="yolo",
    params=61_949_149,
    params_source="darknet yolov3.cfg (80 classes) as built by ultralytics/yolov3: 61,949,149",
    source="Redmon & Farhadi, 2018 (arXiv:1804.02767); layers of pjreddie/darknet cfg/yolov3.cfg",
    task="object detection (COCO, 80 classes)",
    sample_unit="images",
    loss="simplified YOLO loss for profiling: objectness BCE + box MSE + class BCE on assigned cells",
    defaults={"image_size": 416, "objects_per_image": 8},
    make_model=lambda o: YOLOv3(),
    make_batch=_batch,
    make_loss=_loss,
    input_shape=lambda o: (3, o["image_size"], o["image_size"]),
    validate=_validate,
    notes="options image_size (multiple of 32, default 416), objects_per_image (default 8)",
)

ENTRIES: tuple[ZooEntry, ...] = (yolov3,)
