"""srift.learn: learned cost models (compute across GPUs, multi-GPU iteration correction),
trained with scikit-learn on ../shared/data and shipped as portable JSON evaluated by the core.

Entry points: :func:`default_models` (what the engine calls), :func:`srift.learn.train.train_all`
(what `srift train` runs), :mod:`srift.learn.export` / :mod:`srift.learn.loader`.
"""
from __future__ import annotations

from srift.learn.models import CostModels, default_models

__all__ = ["CostModels", "default_models"]
