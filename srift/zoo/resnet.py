"""ResNets: ResNet-18 for CIFAR-10 (kuangliu/pytorch-cifar) and ResNet-50 (torchvision layout).

He et al., "Deep Residual Learning for Image Recognition", CVPR 2016. Module names follow the
two reference code bases so that profiles read like the models people know.
"""
from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from srift.zoo._common import Options, ZooEntry, check_range, cross_entropy_loss, image_batch

__all__ = ["BasicBlock", "Bottleneck", "ENTRIES", "ResNet50", "ResNetCifar", "resnet18_cifar", "resnet50"]


class BasicBlock(nn.Module):
    """kuangliu's BasicBlock: two 3x3 convs, 1x1 conv + BN shortcut when the shape changes."""

    expansion = 1

    def __init__(self, in_planes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, planes, 1, stride=stride, bias=False),
                nn.BatchNorm2d(planes),
            )

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        # the shortcut runs after the main branch, matching its registration order
        out = out + self.shortcut(x)
        return F.relu(out)


class ResNetCifar(nn.Module):
    """ResNet for 32x32 inputs: 3x3 stem without max-pool, 4x4 average pool, one linear layer."""

    def __init__(self, num_blocks: tuple[int, int, int, int] = (2, 2, 2, 2), num_classes: int = 10) -> None:
        super().__init__()
        self.in_planes = 64
        self.conv1 = nn.Conv2d(3, 64, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.layer1 = self._make_layer(64, num_blocks[0], 1)
        self.layer2 = self._make_layer(128, num_blocks[1], 2)
        self.layer3 = self._make_layer(256, num_blocks[2], 2)
        self.layer4 = self._make_layer(512, num_blocks[3], 2)
        self.linear = nn.Linear(512, num_classes)

    def _make_layer(self, planes: int, blocks: int, stride: int) -> nn.Sequential:
        layers = []
        for s in [stride] + [1] * (blocks - 1):
            layers.append(BasicBlock(self.in_planes, planes, s))
            self.in_planes = planes
        return nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer4(self.layer3(self.layer2(self.layer1(out))))
        out = F.avg_pool2d(out, 4)
        return self.linear(out.flatten(1))


class Bottleneck(nn.Module):
    """torchvision Bottleneck (ResNet v1.5: the stride sits on the 3x3 conv)."""

    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * self.expansion, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x: Tensor) -> Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(out + identity)


class ResNet50(nn.Module):
    """torchvision.models.resnet50 layout (conv1/bn1/relu/maxpool/layer1-4/avgpool/fc)."""

    def __init__(self, layers: tuple[int, int, int, int] = (3, 4, 6, 3), num_classes: int = 1000) -> None:
        super().__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.layer1 = self._make_layer(64, layers[0], 1)
        self.layer2 = self._make_layer(128, layers[1], 2)
        self.layer3 = self._make_layer(256, layers[2], 2)
        self.layer4 = self._make_layer(512, layers[3], 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * Bottleneck.expansion, num_classes)
        # torchvision's initialisation, so the example loss is in the usual range
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def _make_layer(self, planes: int, blocks: int, stride: int) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.inplanes != planes * Bottleneck.expansion:
            downsample = nn.Sequential(
                nn.Conv2d(self.inplanes, planes * Bottleneck.expansion, 1, stride=stride, bias=False),
                nn.BatchNorm2d(planes * Bottleneck.expansion),
            )
        layers = [Bottleneck(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * Bottleneck.expansion
        layers += [Bottleneck(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(self.avgpool(x).flatten(1))


def _check_imagenet(options: Options) -> None:
    # five stride-2 stages: below 32 pixels the last feature map would vanish
    check_range("image_size", options["image_size"], 32, 1024)


resnet18_cifar = ZooEntry(
    name="resnet18_cifar",
    family="resnet",
    params=11_173_962,
    params_source="kuangliu/pytorch-cifar models/resnet.py ResNet18() (10 classes): 11,173,962",
    source="He et al., CVPR 2016; CIFAR variant from github.com/kuangliu/pytorch-cifar",
    task="image classification (CIFAR-10, 10 classes)",
    sample_unit="images",
    loss="cross-entropy",
    defaults={},
    make_model=lambda o: ResNetCifar(),
    make_batch=image_batch(32, 10),
    make_loss=cross_entropy_loss,
    input_shape=lambda o: (3, 32, 32),
)

resnet50 = ZooEntry(
    name="resnet50",
    family="resnet",
    params=25_557_032,
    params_source="torchvision.models.resnet50 (ImageNet-1k weights card): 25,557,032",
    source="He et al., CVPR 2016; layout of torchvision.models.resnet50",
    task="image classification (ImageNet-1k, 1000 classes)",
    sample_unit="images",
    loss="cross-entropy",
    defaults={"image_size": 224},
    make_model=lambda o: ResNet50(),
    make_batch=image_batch(224, 1000),
    make_loss=cross_entropy_loss,
    input_shape=lambda o: (3, o["image_size"], o["image_size"]),
    validate=_check_imagenet,
)

ENTRIES: tuple[ZooEntry, ...] = (resnet18_cifar, resnet50)
