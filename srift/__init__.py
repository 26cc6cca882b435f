"""srift: which cloud GPUs should I rent to train this model?

Profiles a PyTorch model, predicts the iteration time and cost of synchronous data-parallel
training on any EC2 cluster, and searches for the cheapest plan that meets a deadline or the
fastest within a budget.

Submodules load on first use (PEP 562), so ``import srift`` stays fast and does not import
torch until profiling is asked for.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> (module, attribute)
_EXPORTS: dict[str, tuple[str, str]] = {
    "profile": ("srift.profiler", "profile"),
    "Profile": ("srift.profile_data", "Profile"),
    "Measurement": ("srift.profile_data", "Measurement"),
    "Catalog": ("srift.catalog", "Catalog"),
    "Cluster": ("srift.cluster", "Cluster"),
    "predict": ("srift.prediction", "predict"),
    "Engine": ("srift.engine", "Engine"),
    "EngineConfig": ("srift.engine", "EngineConfig"),
    "Prediction": ("srift.prediction", "Prediction"),
    "recommend": ("srift.planning", "recommend"),
    "Recommendation": ("srift.planning", "Recommendation"),
    "Plan": ("srift.planning", "Plan"),
    "pareto": ("srift.planning", "pareto"),
    "UnevenBatchSampler": ("srift.sampler", "UnevenBatchSampler"),
    "zoo": ("srift.zoo", None),
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    try:
        module_name, attribute = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'srift' has no attribute {name!r}") from None
    module = importlib.import_module(module_name)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from srift import zoo
    from srift.catalog import Catalog
    from srift.cluster import Cluster
    from srift.engine import Engine, EngineConfig
    from srift.prediction import Prediction, predict
    from srift.profile_data import Measurement, Profile
    from srift.profiler import profile
    from srift.planning import Plan, Recommendation, pareto, recommend
    from srift.sampler import UnevenBatchSampler
