"""SSD300 v1.1 with a ResNet-50 backbone, NVIDIA DeepLearningExamples layout, 81 COCO classes.

Liu et al., "SSD: Single Shot MultiBox Detector", ECCV 2016; the model is NVIDIA's
PyTorch/Detection/SSD (``ssd/model.py``: ``ResNet``, ``SSD300``, ``Loss``; ``ssd/utils.py``:
``DefaultBoxes``, ``dboxes300_coco``). The backbone is torchvision's ResNet-50 cut after
layer3 (``children()[:7]``) with the strides of layer3's first block set to 1, so the first
detection map is 38x38x1024; five additional blocks give 19x19x512, 10x10x512, 5x5x256,
3x3x256 and 1x1x256. A 3x3 loc conv (4 per box) and a 3x3 conf conv (81 per box) per map with
[4, 6, 6, 6, 4, 4] default boxes per cell give 8732 boxes. Module names follow the reference
(``feature_extractor.feature_extractor``, ``additional_blocks``, ``loc``, ``conf``).

Batch: N(0,1) images (N, 3, 300, 300) and the targets the reference's data pipeline hands to
its ``Loss``: per default box the matched ground-truth box in xywh (N, 4, 8732; unmatched boxes
carry the default box itself) and its label (N, 8732; 0 = background). A fixed number of
default boxes per image are positives, their boxes a jitter of the default box.
"""
from __future__ import annotations

import functools
import math

import torch
from torch import Tensor, nn

from srift.zoo._common import BatchFactory, LossFn, Options, ZooEntry
from srift.zoo.resnet import ResNet50

__all__ = ["ENTRIES", "Loss", "ResNet", "SSD300", "dboxes300_coco", "ssd300"]

IMAGE_SIZE = 300
NUM_CLASSES = 81  # 80 COCO classes + background
NUM_DEFAULTS = (4, 6, 6, 6, 4, 4)
NUM_BOXES = 8732
POSITIVES_PER_IMAGE = 24  # matched default boxes per example image (IoU > 0.5 to an object)

# ssd/utils.py dboxes300_coco()
FEAT_SIZE = (38, 19, 10, 5, 3, 1)
STEPS = (8, 16, 32, 64, 100, 300)
SCALES = (21, 45, 99, 153, 207, 261, 315)
ASPECT_RATIOS = ((2,), (2, 3), (2, 3), (2, 3), (2,), (2,))
SCALE_XY, SCALE_WH = 0.1, 0.2


class ResNet(nn.Module):
    """The reference's ``ResNet('resnet50')`` feature extractor: layers up to layer3, stride 16
    reduced to 8 by making layer3's first block (and its downsample) stride 1."""

    def __init__(self) -> None:
        super().__init__()
        backbone = ResNet50()
        self.out_channels = [1024, 512, 512, 256, 256, 256]
        # conv1, bn1, relu, maxpool, layer1, layer2, layer3
        self.feature_extractor = nn.Sequential(*list(backbone.children())[:7])
        conv4_block1 = self.feature_extractor[-1][0]
        conv4_block1.conv1.stride = (1, 1)
        conv4_block1.conv2.stride = (1, 1)
        conv4_block1.downsample[0].stride = (1, 1)

    def forward(self, x: Tensor) -> Tensor:
        return self.feature_extractor(x)


class SSD300(nn.Module):
    """Returns (locs (N, 4, 8732), confs (N, 81, 8732)) like the reference."""

    def __init__(self, label_num: int = NUM_CLASSES) -> None:
        super().__init__()
        self.feature_extractor = ResNet()
        self.label_num = label_num
        self.num_defaults = list(NUM_DEFAULTS)
        channels = self.feature_extractor.out_channels
        self.additional_blocks = nn.ModuleList(
            self._extra_block(cin, cout, mid, downsample=i < 3)
            for i, (cin, cout, mid) in enumerate(zip(channels[:-1], channels[1:], [256, 256, 128, 128, 128]))
        )
        self.loc = nn.ModuleList(nn.Conv2d(c, nd * 4, 3, padding=1) for nd, c in zip(self.num_defaults, channels))
        self.conf = nn.ModuleList(
            nn.Conv2d(c, nd * label_num, 3, padding=1) for nd, c in zip(self.num_defaults, channels)
        )
        # reference _init_weights: xavier-uniform on every weight matrix outside the backbone
        for layer in (*self.additional_blocks, *self.loc, *self.conf):
            for param in layer.parameters():
                if param.dim() > 1:
                    nn.init.xavier_uniform_(param)

    @staticmethod
    def _extra_block(cin: int, cout: int, mid: int, downsample: bool) -> nn.Sequential:
        # 1x1 squeeze, then 3x3 (stride 2, pad 1 for the first three; no pad for the last two)
        conv = (
            nn.Conv2d(mid, cout, 3, padding=1, stride=2, bias=False)
            if downsample
            else nn.Conv2d(mid, cout, 3, bias=False)
        )
        return nn.Sequential(
            nn.Conv2d(cin, mid, 1, bias=False),
            nn.BatchNorm2d(mid),
            nn.ReLU(inplace=True),
            conv,
            nn.BatchNorm2d(cout),
            nn.ReLU(inplace=True),
        )

    def bbox_view(self, src: list[Tensor]) -> tuple[Tensor, Tensor]:
        locs, confs = [], []
        for s, loc, conf in zip(src, self.loc, self.conf):
            locs.append(loc(s).reshape(s.size(0), 4, -1))
            confs.append(conf(s).reshape(s.size(0), self.label_num, -1))
        return torch.cat(locs, 2).contiguous(), torch.cat(confs, 2).contiguous()

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        x = self.feature_extractor(x)
        detection_feed = [x]
        for block in self.additional_blocks:
            x = block(x)
            detection_feed.append(x)
        # maps 38x38x4, 19x19x6, 10x10x6, 5x5x6, 3x3x4, 1x1x4 boxes
        return self.bbox_view(detection_feed)


@functools.lru_cache(maxsize=1)
def _dboxes_xywh() -> Tensor:
    """Default boxes (8732, 4) as (cx, cy, w, h) in [0, 1], in the reference's order: per map,
    per box size, row-major over the cells (matching the heads' reshape)."""
    boxes: list[Tensor] = []
    for idx, sfeat in enumerate(FEAT_SIZE):
        fk = IMAGE_SIZE / STEPS[idx]
        sk1, sk2 = SCALES[idx] / IMAGE_SIZE, SCALES[idx + 1] / IMAGE_SIZE
        sk3 = math.sqrt(sk1 * sk2)
        sizes = [(sk1, sk1), (sk3, sk3)]
        for alpha in ASPECT_RATIOS[idx]:
            w, h = sk1 * math.sqrt(alpha), sk1 / math.sqrt(alpha)
            sizes += [(w, h), (h, w)]
        centre = (torch.arange(sfeat, dtype=torch.float64) + 0.5) / fk
        cy, cx = torch.meshgrid(centre, centre, indexing="ij")  # i = row (y), j = column (x)
        for w, h in sizes:
            wh = torch.tensor([w, h], dtype=torch.float64).expand(sfeat * sfeat, 2)
            boxes.append(torch.cat((cx.reshape(-1, 1), cy.reshape(-1, 1), wh), 1))
    out = torch.cat(boxes).float().clamp_(min=0, max=1)
    assert out.shape == (NUM_BOXES, 4)
    return out


def dboxes300_coco() -> Tensor:
    """A copy of the 8732 default boxes, xywh."""
    return _dboxes_xywh().clone()


class Loss(nn.Module):
    """The reference ``Loss``: SmoothL1 on the encoded offsets of the positive boxes plus
    cross-entropy on the positives and the 3x-as-many hardest negatives, each image normalised
    by its positive count, averaged over images (images without positives count 0)."""

    def __init__(self) -> None:
        super().__init__()
        self.scale_xy = 1.0 / SCALE_XY
        self.scale_wh = 1.0 / SCALE_WH
        self.sl1_loss = nn.SmoothL1Loss(reduction="none")
        self.con_loss = nn.CrossEntropyLoss(reduction="none")
        self._dboxes: dict[torch.device, Tensor] = {}

    def dboxes(self, device: torch.device) -> Tensor:
        """(1, 4, 8732), cached per device so no copy runs in the training loop."""
        if device not in self._dboxes:
            self._dboxes[device] = _dboxes_xywh().t().unsqueeze(0).contiguous().to(device)
        return self._dboxes[device]

    def _loc_vec(self, loc: Tensor) -> Tensor:
        d = self.dboxes(loc.device)
        gxy = self.scale_xy * (loc[:, :2, :] - d[:, :2, :]) / d[:, 2:, :]
        gwh = self.scale_wh * (loc[:, 2:, :] / d[:, 2:, :]).log()
        return torch.cat((gxy, gwh), dim=1).contiguous()

    def forward(self, ploc: Tensor, plabel: Tensor, gloc: Tensor, glabel: Tensor) -> Tensor:
        mask = glabel > 0
        pos_num = mask.sum(dim=1)
        vec_gd = self._loc_vec(gloc)
        sl1 = self.sl1_loss(ploc, vec_gd).sum(dim=1)
        sl1 = (mask.float() * sl1).sum(dim=1)

        # hard negative mining: rank the negatives by their loss, keep the top 3 x positives
        con = self.con_loss(plabel, glabel)
        con_neg = con.masked_fill(mask, 0)  # the reference's con_neg[mask] = 0
        _, con_idx = con_neg.sort(dim=1, descending=True)
        _, con_rank = con_idx.sort(dim=1)
        neg_num = torch.clamp(3 * pos_num, max=mask.size(1)).unsqueeze(-1)
        neg_mask = con_rank < neg_num
        closs = (con * (mask | neg_mask).float()).sum(dim=1)

        total_loss = sl1 + closs
        num_mask = (pos_num > 0).float()
        pos_num = pos_num.float().clamp(min=1e-6)
        return (total_loss * num_mask / pos_num).mean(dim=0)


def _batch(factory: BatchFactory, batch_size: int, options: Options) -> tuple[Tensor, tuple[Tensor, Tensor]]:
    n = batch_size
    images = factory.randn((n, 3, IMAGE_SIZE, IMAGE_SIZE))
    if factory.meta:
        return images, (factory.empty((n, 4, NUM_BOXES), torch.float32), factory.empty((n, NUM_BOXES), torch.int64))
    p = POSITIVES_PER_IMAGE
    # distinct positive boxes per image, their classes, and standard-normal encoded offsets
    idx = factory.rand((n, NUM_BOXES)).cpu().topk(p, dim=1).indices
    cls = factory.randint(1, NUM_CLASSES, (n, p)).cpu()
    offsets = factory.randn((n, 4, p)).cpu()
    d = _dboxes_xywh().t().unsqueeze(0).expand(n, 4, NUM_BOXES)
    d_pos = d.gather(2, idx.unsqueeze(1).expand(n, 4, p))
    # inverse of Loss._loc_vec, so the encoded target of each positive is exactly `offsets`
    xy = d_pos[:, :2] + SCALE_XY * offsets[:, :2] * d_pos[:, 2:]
    wh = d_pos[:, 2:] * torch.exp(SCALE_WH * offsets[:, 2:])
    gloc = d.clone().scatter_(2, idx.unsqueeze(1).expand(n, 4, p), torch.cat((xy, wh), 1))
    glabel = torch.zeros((n, NUM_BOXES), dtype=torch.int64).scatter_(1, idx, cls)
    return images, (factory.cpu_tensor(gloc), factory.cpu_tensor(glabel))


def _loss(options: Options) -> LossFn:
    criterion = Loss()

    def loss_fn(output: tuple[Tensor, Tensor], targets: tuple[Tensor, Tensor]) -> Tensor:
        ploc, plabel = output
        gloc, glabel = targets
        return criterion(ploc.float(), plabel.float(), gloc, glabel)

    return loss_fn


def _param_count() -> int:
    """By hand from the reference structure (kept next to the entry so it can be audited)."""
    bn = 2  # weight + bias per channel
    # ResNet-50 through layer3: conv1 7x7 3->64 + bn, then bottlenecks (1x1, 3x3, 1x1 [+1x1 ds])
    stem = 3 * 64 * 49 + bn * 64

    def bottleneck(cin: int, planes: int, ds: bool) -> int:
        convs = cin * planes + planes * planes * 9 + planes * planes * 4 + (cin * planes * 4 if ds else 0)
        return convs + bn * (planes + planes + planes * 4 + (planes * 4 if ds else 0))

    layer1 = bottleneck(64, 64, True) + 2 * bottleneck(256, 64, False)
    layer2 = bottleneck(256, 128, True) + 3 * bottleneck(512, 128, False)
    layer3 = bottleneck(512, 256, True) + 5 * bottleneck(1024, 256, False)
    channels = [1024, 512, 512, 256, 256, 256]
    extra = sum(
        cin * mid + bn * mid + mid * cout * 9 + bn * cout
        for cin, cout, mid in zip(channels[:-1], channels[1:], [256, 256, 128, 128, 128])
    )
    heads = sum(nd * (4 + NUM_CLASSES) * (9 * c + 1) for nd, c in zip(NUM_DEFAULTS, channels))
    return stem + layer1 + layer2 + layer3 + extra + heads


ssd300 = ZooEntry(
    name="ssd300",
    family="ssd",
    params=22_894_902,
    params_source=(
        "computed from NVIDIA DeepLearningExamples PyTorch/Detection/SSD ssd/model.py "
        "SSD300(ResNet('resnet50')), 81 classes: ResNet-50 conv1..layer3 8,543,296 "
        "(stem 9,536 + layer1 215,808 + layer2 1,219,584 + layer3 7,098,368) + additional_blocks "
        "3,773,696 + loc/conf 3x3 heads sum_k nd_k*(4+81)*(9*C_k+1) = 10,577,910 "
        "(nd=[4,6,6,6,4,4], C=[1024,512,512,256,256,256]) = 22,894,902"
    ),
    source="Liu et al., ECCV 2016 (arXiv:1512.02325); NVIDIA DeepLearningExamples PyTorch/Detection/SSD v1.1",
    task="object detection (COCO, 80 classes + background), 8732 default boxes",
    sample_unit="images",
    loss="SSD MultiBox loss (reference Loss): SmoothL1 on positive boxes + cross-entropy with 3:1 "
    "hard negative mining, normalised by positives per image",
    defaults={},
    make_model=lambda o: SSD300(),
    make_batch=_batch,
    make_loss=_loss,
    input_shape=lambda o: (3, IMAGE_SIZE, IMAGE_SIZE),
    notes=f"fixed 300x300 input (the default boxes are for 300); {POSITIVES_PER_IMAGE} positive "
    "default boxes per example image; backbone initialised as torchvision (the reference "
    "loads ImageNet weights)",
)

ENTRIES: tuple[ZooEntry, ...] = (ssd300,)
