"""scikit-learn estimators -> portable JSON parameters (schema "srift.learned-model/1").

Supported: LinearRegression/Ridge/Lasso/ElasticNet/HuberRegressor (optionally behind a StandardScaler in a
Pipeline), GradientBoostingRegressor (squared error; init None, "zero" or a DummyRegressor),
RandomForestRegressor / ExtraTreesRegressor / DecisionTreeRegressor (NaN routed by each node's
missing_go_to_left, as scikit-learn >= 1.3 does), HistGradientBoostingRegressor (numeric
features; identity-link losses: squared_error, absolute_error, quantile), MLPRegressor.
See csrc/include/srift/learned.hpp, note "portable models".
"""
from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np

__all__ = ["SCHEMA_ID", "export_estimator"]

SCHEMA_ID = "srift.learned-model/1"


def _tree_arrays(tree: Any, value_scale: float = 1.0) -> dict[str, list]:
    t = tree.tree_
    leaf = t.children_left < 0
    out = {
        "feature": [int(f) if not lf else -1 for f, lf in zip(t.feature, leaf)],
        "threshold": [_finite_threshold(x) if not lf else 0.0 for x, lf in zip(t.threshold, leaf)],
        "left": [int(x) if not lf else -1 for x, lf in zip(t.children_left, leaf)],
        "right": [int(x) if not lf else -1 for x, lf in zip(t.children_right, leaf)],
        "value": [float(v) * value_scale for v in t.value[:, 0, 0]],
    }
    # scikit-learn >= 1.3 routes a NaN input at each split by tree_.missing_go_to_left (to the
    # child with more samples when training saw no NaN there); the core reads the same array as
    # "missing_left" (absent: NaN goes right, what older scikit-learn's trees did).
    missing = getattr(t, "missing_go_to_left", None)
    if missing is not None:
        out["missing_left"] = [int(bool(m)) if not lf else 0 for m, lf in zip(missing, leaf)]
    return out


def _finite_threshold(x: float) -> float:
    """A split threshold as JSON can hold it. A tree trained with NaN splits "missing or not" at
    +inf (every number left, NaN by missing_left): exported as the largest double, which the core
    reads back as +inf (so that an infinite input, which HistGradientBoosting takes, goes left)."""
    x = float(x)
    if x == math.inf:
        return sys.float_info.max
    if not math.isfinite(x):
        raise ValueError(f"a tree split threshold of {x!r} cannot be exported")
    return x


def _hist_tree_arrays(predictor: Any) -> dict[str, list]:
    nodes = predictor.nodes
    if getattr(predictor, "raw_left_cat_bitsets", None) is not None and len(predictor.raw_left_cat_bitsets):
        if np.any(nodes["is_categorical"]):
            raise ValueError("HistGradientBoostingRegressor with categorical features cannot be exported")
    leaf = nodes["is_leaf"].astype(bool)
    return {
        "feature": [int(f) if not lf else -1 for f, lf in zip(nodes["feature_idx"], leaf)],
        "threshold": [_finite_threshold(x) if not lf else 0.0 for x, lf in zip(nodes["num_threshold"], leaf)],
        "left": [int(x) if not lf else -1 for x, lf in zip(nodes["left"], leaf)],
        "right": [int(x) if not lf else -1 for x, lf in zip(nodes["right"], leaf)],
        "value": [float(v) for v in nodes["value"]],
        "missing_left": [int(bool(m)) for m in nodes["missing_go_to_left"]],
    }


# Losses whose raw prediction is the prediction (identity link). poisson and gamma predict
# exp(raw): the sum of the trees is log(y), which the core would return as y.
_HIST_IDENTITY_LOSSES = ("squared_error", "absolute_error", "quantile")


def _require_identity_link(est: Any) -> None:
    """ValueError unless a HistGradientBoostingRegressor predicts its raw score (identity link)."""
    loss = est.loss if isinstance(est.loss, str) else type(est.loss).__name__
    link = getattr(getattr(est, "_loss", None), "link", None)
    if loss not in _HIST_IDENTITY_LOSSES or (link is not None and type(link).__name__ != "IdentityLink"):
        how = f" (its link is {type(link).__name__}: predict is not the trees' sum)" if link is not None else ""
        raise ValueError(f"HistGradientBoostingRegressor loss {loss!r} is not exportable{how}; exportable losses: "
                         + ", ".join(_HIST_IDENTITY_LOSSES))


def _require_constant_init(est: Any) -> None:
    """ValueError unless a GradientBoostingRegressor's init model predicts a constant (None,
    "zero" or a DummyRegressor): the export keeps the init's prediction as a constant base."""
    from sklearn.dummy import DummyRegressor

    init = est.init
    if init is None or (isinstance(init, str) and init == "zero") or isinstance(init, DummyRegressor):
        return
    raise ValueError(f"GradientBoostingRegressor init={init!r} is not exportable: only init=None, 'zero' or a "
                     "DummyRegressor (a constant start) can be, the export keeps the init model's prediction "
                     "as one constant")


def _accepts_nan(est: Any) -> bool:
    """Whether the fitted estimator's predict takes NaN: scikit-learn's own check of X, tried on
    one row of NaN (its trees and forests do, by their estimator tags; GradientBoostingRegressor
    does not)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            est.predict(np.full((1, est.n_features_in_), np.nan))
        except ValueError:
            return False
    return True


def _model_params(est: Any) -> dict[str, Any]:
    from sklearn.ensemble import (ExtraTreesRegressor, GradientBoostingRegressor,
                                  HistGradientBoostingRegressor, RandomForestRegressor)
    from sklearn.linear_model import ElasticNet, HuberRegressor, Lasso, LinearRegression, Ridge
    from sklearn.neural_network import MLPRegressor
    from sklearn.tree import DecisionTreeRegressor

    # A document holds one output: the trees' value[:, 0, 0] and the coefficients' first row
    # were all that a multi-output estimator kept (its other outputs silently dropped).
    outputs = getattr(est, "n_outputs_", None)
    if outputs is not None and outputs != 1:
        raise ValueError(f"cannot export {type(est).__name__} with n_outputs_ = {outputs}: a learned model "
                         "predicts one output")
    if isinstance(est, (LinearRegression, Ridge, Lasso, ElasticNet, HuberRegressor)):
        if np.ndim(est.coef_) == 2 and np.shape(est.coef_)[0] != 1:
            raise ValueError(f"cannot export {type(est).__name__} with {np.shape(est.coef_)[0]} outputs (coef_ of "
                             f"shape {np.shape(est.coef_)}): a learned model predicts one output")
        coef = np.ravel(est.coef_)
        return {"type": "linear", "coef": [float(c) for c in coef], "intercept": float(np.ravel([est.intercept_])[0])}
    if isinstance(est, GradientBoostingRegressor):
        if est.loss != "squared_error":
            raise ValueError(f"GradientBoostingRegressor loss {est.loss!r} is not exportable (squared_error only)")
        _require_constant_init(est)
        base = float(np.ravel(est._raw_predict_init(np.zeros((1, est.n_features_in_))))[0])
        trees = [_tree_arrays(stage[0]) for stage in est.estimators_]
        # predict_stages: out = init, then out += learning_rate * tree, stage by stage
        return {"type": "tree_ensemble", "base": base, "scale": float(est.learning_rate),
                "float32_inputs": True, "average": False, "allow_nan": _accepts_nan(est), "trees": trees}
    if isinstance(est, (RandomForestRegressor, ExtraTreesRegressor)):
        trees = [_tree_arrays(t) for t in est.estimators_]
        # ForestRegressor.predict: the trees summed from 0, then divided by their number
        return {"type": "tree_ensemble", "base": 0.0, "scale": 1.0, "float32_inputs": True, "average": True,
                "allow_nan": _accepts_nan(est), "trees": trees}
    if isinstance(est, DecisionTreeRegressor):
        return {"type": "tree_ensemble", "base": 0.0, "scale": 1.0, "float32_inputs": True, "average": False,
                "allow_nan": _accepts_nan(est), "trees": [_tree_arrays(est)]}
    if isinstance(est, HistGradientBoostingRegressor):
        if getattr(est, "is_categorical_", None) is not None and np.any(est.is_categorical_):
            raise ValueError("HistGradientBoostingRegressor with categorical features cannot be exported")
        _require_identity_link(est)
        trees = [_hist_tree_arrays(it[0]) for it in est._predictors]
        # _raw_predict: out = baseline, then out += tree (the learning rate is in the leaves);
        # X is float64, and NaN and infinities are taken
        return {"type": "tree_ensemble", "base": float(np.ravel(est._baseline_prediction)[0]), "scale": 1.0,
                "float32_inputs": False, "average": False, "allow_nan": _accepts_nan(est), "trees": trees}
    if isinstance(est, MLPRegressor):
        if est.out_activation_ != "identity":
            raise ValueError(f"MLPRegressor output activation {est.out_activation_!r} is not exportable")
        layers = []
        n = len(est.coefs_)
        for i, (w, b) in enumerate(zip(est.coefs_, est.intercepts_)):
            layers.append({"weights": [[float(x) for x in row] for row in w], "bias": [float(x) for x in b],
                           "activation": est.activation if i < n - 1 else "identity"})
        return {"type": "mlp", "layers": layers}
    raise ValueError(f"cannot export {type(est).__name__}: supported are linear models, gradient-boosted "
                     "trees, random forests, HistGradientBoosting and MLPRegressor")


def export_estimator(estimator: Any, name: str, features: list[str], **metadata: Any) -> dict[str, Any]:
    """A "srift.learned-model/1" document for a fitted estimator (or Pipeline of a
    StandardScaler and an estimator, or a VotingRegressor of those with equal weights: model
    type "mean"). `metadata` goes in as is (target, residuals, training, ...): each key must be
    one of the optional top-level fields of a document of this name (the schema's: srift's own
    models, by name, carry fields of their own, srift.learn.loader document_fields; a record of
    your own goes under `training`, which holds any keys), as the loader refuses any other:
    ValueError naming the key."""
    from sklearn.ensemble import VotingRegressor

    _check_metadata_keys(metadata, name)

    if isinstance(estimator, VotingRegressor):
        if estimator.weights is not None and len(set(estimator.weights)) > 1:
            raise ValueError("only a VotingRegressor with equal weights can be exported")
        members = []
        for member in estimator.estimators_:
            if isinstance(member, VotingRegressor):
                raise ValueError("a VotingRegressor's members cannot be VotingRegressors")
            members.append(_scaler_and_model(member, features))
        doc: dict[str, Any] = {"schema": SCHEMA_ID, "name": name, "features": list(features), "input_scaler": None,
                               "model": {"type": "mean", "members": members}}
    else:
        doc = {"schema": SCHEMA_ID, "name": name, "features": list(features), **_scaler_and_model(estimator, features)}
    doc.update(metadata)
    return doc


# What export_estimator writes itself: metadata may not replace them.
_STRUCTURE = ("schema", "name", "features", "input_scaler", "model")


def _check_metadata_keys(metadata: dict[str, Any], name: Any) -> None:
    """ValueError naming a metadata key that is not an optional top-level field of a document
    named `name` (its kind: srift.learn.loader document_fields; a misspelled "residual" was
    written, then refused by the loader or, before the schema closed its objects, skipped as if
    absent)."""
    from srift.learn.loader import document_fields, document_kinds, nearest_key

    allowed = sorted(set(document_fields(name)) - set(_STRUCTURE))
    for key in metadata:
        if key in _STRUCTURE:
            raise ValueError(f"export_estimator: metadata {key!r} would replace the {key} export_estimator writes "
                             "from the estimator")
        if key not in allowed:
            nearest = nearest_key(key, allowed)
            hint = f" (did you mean {nearest!r}?)" if nearest else ""
            owners = [k for k, fields in document_kinds().items() if key in fields]
            if owners:
                hint += f" (a field of {' and '.join(owners)} documents)"
            raise ValueError(f"export_estimator: metadata {key!r} is not a field of a {SCHEMA_ID} document named "
                             f"{name!r}{hint}; known: {', '.join(allowed)} (a record of your own goes under "
                             "'training')")


def _scaler_and_model(estimator: Any, features: list[str]) -> dict[str, Any]:
    """{"input_scaler", "model"} of a fitted estimator or Pipeline(StandardScaler, estimator)."""
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

    scaler = None
    est = estimator
    if isinstance(estimator, Pipeline):
        steps = [s for _, s in estimator.steps]
        if len(steps) == 2 and isinstance(steps[0], StandardScaler):
            sc = steps[0]
            mean = sc.mean_ if sc.with_mean else np.zeros(sc.n_features_in_)
            scale = sc.scale_ if sc.with_std else np.ones(sc.n_features_in_)
            scaler = {"mean": [float(x) for x in mean], "scale": [float(x) for x in scale]}
            est = steps[1]
        elif len(steps) == 1:
            est = steps[0]
        else:
            raise ValueError("only Pipeline(StandardScaler, estimator) can be exported")
    n = getattr(est, "n_features_in_", len(features))
    if n != len(features):
        raise ValueError(f"estimator takes {n} features but {len(features)} names were given")
    return {"input_scaler": scaler, "model": _model_params(est)}
