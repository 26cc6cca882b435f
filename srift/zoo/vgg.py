"""VGG-16 without batch norm (configuration "D"), torchvision layout.

Simonyan & Zisserman, "Very Deep Convolutional Networks for Large-Scale Image Recognition",
ICLR 2015. Names match torchvision.models.vgg16: ``features``, ``avgpool``, ``classifier``.
"""
from __future__ import annotations

from torch import Tensor, nn

from srift.zoo._common import Options, ZooEntry, check_range, cross_entropy_loss, image_batch

__all__ = ["ENTRIES", "VGG", "VGG16_CFG", "vgg16"]

# channels per 3x3 conv, "M" = 2x2 max-pool (torchvision cfgs["D"])
VGG16_CFG: tuple[int | str, ...] = (
    64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M",
)


class VGG(nn.Module):
    def __init__(self, cfg: tuple[int | str, ...] = VGG16_CFG, num_classes: int = 1000) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        channels = 3
        for v in cfg:
            if v == "M":
                layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
            else:
                assert isinstance(v, int)
                layers += [nn.Conv2d(channels, v, kernel_size=3, padding=1), nn.ReLU(inplace=True)]
                channels = v
        self.features = nn.Sequential(*layers)
        # adaptive pooling makes the 25088-wide classifier independent of the input size
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096),
            nn.ReLU(True),
            nn.Dropout(p=0.5),
            nn.Linear(4096, 4096),
            nn.ReLU(True),
            nn.Dropout(p=0.5),
            nn.Linear(4096, num_classes),
        )
        # torchvision's initialisation
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x: Tensor) -> Tensor:
        x = self.avgpool(self.features(x))
        return self.classifier(x.flatten(1))


def _check(options: Options) -> None:
    check_range("image_size", options["image_size"], 32, 1024)


vgg16 = ZooEntry(
    name="vgg16",
    family="vgg",
    params=138_357_544,
    params_source="torchvision.models.vgg16 (ImageNet-1k weights card): 138,357,544",
    source="Simonyan & Zisserman, ICLR 2015; layout of torchvision.models.vgg16 (no BN)",
    task="image classification (ImageNet-1k, 1000 classes)",
    sample_unit="images",
    loss="cross-entropy",
    defaults={"image_size": 224},
    make_model=lambda o: VGG(),
    make_batch=image_batch(224, 1000),
    make_loss=cross_entropy_loss,
    input_shape=lambda o: (3, o["image_size"], o["image_size"]),
    validate=_check,
)

ENTRIES: tuple[ZooEntry, ...] = (vgg16,)
