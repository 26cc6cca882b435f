"""The core evaluates exported scikit-learn models exactly as scikit-learn predicts."""
from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("sklearn")
from sklearn.ensemble import (ExtraTreesRegressor, GradientBoostingRegressor, HistGradientBoostingRegressor,
                              RandomForestRegressor, VotingRegressor)
from sklearn.linear_model import ElasticNet, HuberRegressor, Lasso, LinearRegression, Ridge
from sklearn.neural_network import MLPRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeRegressor

from srift.learn.export import export_estimator
from srift.learn.loader import model_from_dict, validate_model_dict


def _data(seed: int = 0, n: int = 300, d: int = 6):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)) * rng.uniform(0.1, 10, size=d)
    y = np.sin(x[:, 0]) + 0.3 * x[:, 1] ** 2 - 0.1 * x[:, 2] * x[:, 3] + rng.normal(scale=0.1, size=n)
    return x, y


ESTIMATORS = {
    "linear": lambda: LinearRegression(),
    "ridge": lambda: make_pipeline(StandardScaler(), Ridge(alpha=0.3)),
    "lasso": lambda: Lasso(alpha=0.01),
    "elasticnet": lambda: make_pipeline(StandardScaler(), ElasticNet(alpha=0.01, l1_ratio=0.3)),
    "huber": lambda: make_pipeline(StandardScaler(), HuberRegressor(epsilon=1.35, alpha=1e-3, max_iter=2000)),
    "gbr": lambda: GradientBoostingRegressor(n_estimators=40, max_depth=3, learning_rate=0.1, random_state=0),
    "rf": lambda: RandomForestRegressor(n_estimators=15, max_depth=6, random_state=0),
    "et": lambda: ExtraTreesRegressor(n_estimators=15, max_depth=6, random_state=0),
    "dt": lambda: DecisionTreeRegressor(max_depth=8, random_state=0),
    "hgb": lambda: HistGradientBoostingRegressor(max_iter=30, random_state=0),
    "mlp": lambda: make_pipeline(StandardScaler(), MLPRegressor(hidden_layer_sizes=(16, 8), max_iter=300,
                                                                 random_state=0)),
    "mlp_tanh": lambda: MLPRegressor(hidden_layer_sizes=(8,), activation="tanh", max_iter=200, random_state=0),
    "mlp_logistic": lambda: make_pipeline(StandardScaler(), MLPRegressor(hidden_layer_sizes=(8,), activation="logistic",
                                                                          max_iter=300, random_state=0)),
    "mlp_identity": lambda: MLPRegressor(hidden_layer_sizes=(8,), activation="identity", max_iter=300, random_state=0),
    # srift.learn.train note "mean of two": members with and without their own input scaling
    "mean": lambda: VotingRegressor([("huber", make_pipeline(StandardScaler(), HuberRegressor(max_iter=2000))),
                                     ("gbr", GradientBoostingRegressor(n_estimators=40, random_state=0)),
                                     ("mlp", MLPRegressor(hidden_layer_sizes=(8,), max_iter=200, random_state=0))]),
}


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("kind", sorted(ESTIMATORS))
def test_core_equals_sklearn(kind: str) -> None:
    x, y = _data()
    est = ESTIMATORS[kind]().fit(x, y)
    names = [f"x{i}" for i in range(x.shape[1])]
    doc = json.loads(json.dumps(export_estimator(est, kind, names)))  # through text, as shipped
    core = model_from_dict(doc)
    rng = np.random.default_rng(1)
    probe = np.vstack([x[:50], rng.normal(size=(200, x.shape[1])) * 20])  # in and far out of range
    want = est.predict(probe)
    got = core.predict(probe)
    # relative to each prediction, with no absolute floor that would hide a prediction near 0
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=0)
    if kind in TREES:  # the same comparisons, summed in scikit-learn's order: the same bits
        np.testing.assert_array_equal(got, want)
    assert core.predict(probe[0])[0] == pytest.approx(want[0], rel=1e-9, abs=0)


TREES = ("gbr", "rf", "et", "dt", "hgb")


@pytest.mark.parametrize("kind", TREES)
def test_trees_equal_sklearn_where_the_prediction_is_a_small_difference(kind: str) -> None:
    # Review: base + scale * (sum of the trees) was 1e-7 off, relative, where a 1e4 baseline and
    # stages of thousands cancel to ~1e-4; scikit-learn adds stage by stage (forests: sum, divide).
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 3))
    y = np.where(x[:, 0] > -1.5, 1e4, 0.0) + x[:, 1] * 1e-3  # ~7% of the targets near 0
    est = {"gbr": lambda: GradientBoostingRegressor(n_estimators=200, max_depth=3, learning_rate=0.3, random_state=0),
           "hgb": lambda: HistGradientBoostingRegressor(max_iter=200, random_state=0),
           "rf": lambda: RandomForestRegressor(n_estimators=30, random_state=0),
           "et": lambda: ExtraTreesRegressor(n_estimators=30, random_state=0),
           "dt": lambda: DecisionTreeRegressor(random_state=0)}[kind]().fit(x, y)
    core = model_from_dict(json.loads(json.dumps(export_estimator(est, kind, ["a", "b", "c"]))))
    want = est.predict(x)
    assert np.min(np.abs(want)) < 1e-3
    np.testing.assert_allclose(core.predict(x), want, rtol=1e-9, atol=0)
    np.testing.assert_array_equal(core.predict(x), want)


def test_hist_gradient_boosting_missing_values() -> None:
    x, y = _data(2)
    x[::7, 1] = np.nan
    est = HistGradientBoostingRegressor(max_iter=20, random_state=0).fit(x, y)
    core = model_from_dict(export_estimator(est, "hgb_nan", [f"x{i}" for i in range(x.shape[1])]))
    np.testing.assert_array_equal(core.predict(x), est.predict(x))


def test_hist_gradient_boosting_split_on_nan_exports_and_routes_as_sklearn() -> None:
    # Review: trained where NaN carries the signal, HistGradientBoosting splits "NaN or not" at
    # num_threshold +inf, which json.dumps(allow_nan=False) refused; the core reads the largest
    # double back as +inf, so an infinite input (which HistGradientBoosting takes) goes left too.
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 2))
    y = rng.normal(size=400) * 0.01
    nan = rng.random(400) < 0.5
    x[nan, 0] = np.nan
    y[nan] += 5
    est = HistGradientBoostingRegressor(max_iter=5, random_state=0).fit(x, y)
    assert any(np.isinf(p[0].nodes["num_threshold"]).any() for p in est._predictors)
    doc = json.loads(json.dumps(export_estimator(est, "h", ["a", "b"]), allow_nan=False))
    assert doc["model"]["allow_nan"] is True and doc["model"]["float32_inputs"] is False
    core = model_from_dict(doc)
    probe = np.vstack([x[:50], [[np.nan, 0.0], [np.inf, 0.0], [-np.inf, 0.0], [1e300, np.inf], [np.nan, np.nan]]])
    want = est.predict(probe)
    np.testing.assert_array_equal(core.predict(probe), want)
    assert core.predict(np.array([np.inf, 0.0]))[0] != core.predict(np.array([np.nan, 0.0]))[0]


def test_wrong_feature_count_is_value_error() -> None:
    x, y = _data()
    core = model_from_dict(export_estimator(Ridge().fit(x, y), "r", [f"x{i}" for i in range(x.shape[1])]))
    with pytest.raises(ValueError, match="takes 6 features"):
        core.predict(np.zeros((2, 5)))


def test_malformed_documents_are_rejected_with_the_path() -> None:
    x, y = _data()
    good = export_estimator(GradientBoostingRegressor(n_estimators=3).fit(x, y), "g",
                            [f"x{i}" for i in range(x.shape[1])])
    bad = json.loads(json.dumps(good))
    bad["schema"] = "srift.learned-model/9"
    with pytest.raises(ValueError, match="schema"):
        model_from_dict(bad)
    bad = json.loads(json.dumps(good))
    bad["model"]["trees"][0]["left"][0] = 0  # a cycle back to the root
    with pytest.raises(ValueError, match=r"trees\[0\]\.left\[0\]"):
        model_from_dict(bad)
    bad = json.loads(json.dumps(good))
    bad["model"]["trees"][1]["value"].pop()
    with pytest.raises(ValueError, match=r"trees\[1\]\.value"):
        model_from_dict(bad)
    bad = json.loads(json.dumps(good))
    bad["model"]["trees"][0]["feature"][0] = 99
    with pytest.raises(ValueError, match="number of features"):
        model_from_dict(bad)
    bad = json.loads(json.dumps(good))
    bad["model"]["type"] = "pickle"
    with pytest.raises(ValueError):
        validate_model_dict(bad)


def test_core_rejects_text_that_is_not_json() -> None:
    from srift import _core

    with pytest.raises(ValueError, match="learned model JSON"):
        _core.LearnedModel.from_json('{"schema": "srift.learned-model/1", ')


def test_mean_models_reject_unequal_weights_and_nesting() -> None:
    x, y = _data()
    names = [f"x{i}" for i in range(x.shape[1])]
    weighted = VotingRegressor([("a", Ridge()), ("b", Ridge(alpha=3))], weights=[1, 2]).fit(x, y)
    with pytest.raises(ValueError, match="equal weights"):
        export_estimator(weighted, "w", names)
    nested = VotingRegressor([("a", Ridge()), ("b", VotingRegressor([("c", Ridge())]))]).fit(x, y)
    with pytest.raises(ValueError, match="cannot be VotingRegressors"):
        export_estimator(nested, "n", names)
    doc = json.loads(json.dumps(export_estimator(VotingRegressor([("a", Ridge())]).fit(x, y), "one", names)))
    doc["model"]["members"][0]["model"] = {"type": "mean", "members": []}
    with pytest.raises(ValueError, match=r"\$\.model"):
        validate_model_dict(doc)


@pytest.mark.parametrize("loss", ["poisson", "gamma"])
def test_hist_gradient_boosting_with_a_log_link_is_refused(loss: str) -> None:
    # Review finding 1: these predict exp(sum of trees); exported as identity the core returned log(y).
    x, y = _data(3)
    est = HistGradientBoostingRegressor(loss=loss, max_iter=5, random_state=0).fit(x, np.exp(y / 4))
    with pytest.raises(ValueError, match=rf"HistGradientBoostingRegressor loss '{loss}' is not exportable.*LogLink"):
        export_estimator(est, "hgb", [f"x{i}" for i in range(x.shape[1])])


@pytest.mark.parametrize("loss", ["absolute_error", "quantile"])
def test_hist_gradient_boosting_identity_link_losses_still_export(loss: str) -> None:
    x, y = _data(3)
    kw = {"quantile": 0.3} if loss == "quantile" else {}
    est = HistGradientBoostingRegressor(loss=loss, max_iter=10, random_state=0, **kw).fit(x, y)
    core = model_from_dict(export_estimator(est, "hgb", [f"x{i}" for i in range(x.shape[1])]))
    np.testing.assert_array_equal(core.predict(x), est.predict(x))


def test_gradient_boosting_with_an_init_estimator_is_refused() -> None:
    # Review finding 2: the init model's prediction at x = 0 used to be exported as a constant base.
    x, y = _data(4)
    est = GradientBoostingRegressor(n_estimators=5, init=Ridge(), random_state=0).fit(x, y)
    with pytest.raises(ValueError, match=r"GradientBoostingRegressor init=Ridge\(\) is not exportable"):
        export_estimator(est, "g", [f"x{i}" for i in range(x.shape[1])])


@pytest.mark.parametrize("init", ["zero", "dummy_median", "dummy_constant"])
def test_gradient_boosting_with_a_constant_init_exports_exactly(init: str) -> None:
    from sklearn.dummy import DummyRegressor

    x, y = _data(4)
    make = {"zero": lambda: "zero", "dummy_median": lambda: DummyRegressor(strategy="median"),
            "dummy_constant": lambda: DummyRegressor(strategy="constant", constant=2.5)}[init]
    est = GradientBoostingRegressor(n_estimators=10, init=make(), random_state=0).fit(x, y)
    core = model_from_dict(export_estimator(est, "g", [f"x{i}" for i in range(x.shape[1])]))
    np.testing.assert_array_equal(core.predict(x), est.predict(x))


def _nan_probe(x: np.ndarray, seed: int = 5) -> np.ndarray:
    rng = np.random.default_rng(seed)
    probe = np.vstack([x[:100], rng.normal(size=(100, x.shape[1])) * 5])
    probe[rng.random(probe.shape) < 0.3] = np.nan
    return probe


@pytest.mark.parametrize("kind", ["dt", "rf", "et"])
@pytest.mark.parametrize("trained_with_nan", [False, True])
def test_sklearn_trees_route_nan_as_sklearn(kind: str, trained_with_nan: bool) -> None:
    # Review finding 3: tree_.missing_go_to_left (scikit-learn >= 1.3) was not exported; the core
    # sent every NaN right.
    from sklearn.ensemble import ExtraTreesRegressor
    from sklearn.tree import DecisionTreeRegressor

    x, y = _data(6)
    if trained_with_nan:
        x = x.copy()
        x[::5, 0] = np.nan
        x[::7, 2] = np.nan
    est = {"dt": lambda: DecisionTreeRegressor(max_depth=6, random_state=0),
           "rf": lambda: RandomForestRegressor(n_estimators=10, max_depth=6, random_state=0),
           "et": lambda: ExtraTreesRegressor(n_estimators=10, max_depth=6, random_state=0)}[kind]().fit(x, y)
    doc = json.loads(json.dumps(export_estimator(est, kind, [f"x{i}" for i in range(x.shape[1])])))
    assert all("missing_left" in t for t in doc["model"]["trees"])
    core = model_from_dict(doc)
    probe = _nan_probe(x)
    np.testing.assert_array_equal(core.predict(probe), est.predict(probe))


def test_gradient_boosting_refuses_nan_as_sklearn_does() -> None:
    # scikit-learn's GradientBoostingRegressor refuses NaN (its trees would route it); the core
    # answered as the trees would. The export says allow_nan false, and the core refuses it too.
    x, y = _data(7)
    est = GradientBoostingRegressor(n_estimators=20, random_state=0).fit(x, y)
    doc = export_estimator(est, "g", [f"x{i}" for i in range(x.shape[1])])
    assert doc["model"]["allow_nan"] is False
    core = model_from_dict(doc)
    probe = x[:3].copy()
    probe[1, 4] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        est.predict(probe)
    with pytest.raises(ValueError, match=r"learned model 'g': feature x4 \(index 4\) is nan: this tree ensemble "
                                         r"takes no NaN"):
        core.predict(probe)
    np.testing.assert_array_equal(core.predict(x), est.predict(x))


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")  # scikit-learn's float32 cast
@pytest.mark.parametrize("kind", ["gbr", "rf", "dt", "scaled_gbr"])
@pytest.mark.parametrize("value", [np.inf, -np.inf, 1e39, -3.5e38, float.fromhex("0x1.ffffffp+127")])
def test_trees_refuse_inputs_float32_cannot_hold_as_sklearn_does(kind: str, value: float) -> None:
    # Review: an infinite input, or one past float32's range, got an answer where scikit-learn's
    # trees (which compare float32 inputs) raise; the binding's ValueError names the feature.
    x, y = _data(9)
    est = {"gbr": lambda: GradientBoostingRegressor(n_estimators=5, random_state=0),
           "rf": lambda: RandomForestRegressor(n_estimators=3, max_depth=4, random_state=0),
           "dt": lambda: DecisionTreeRegressor(max_depth=4, random_state=0),
           "scaled_gbr": lambda: make_pipeline(StandardScaler(with_mean=False, with_std=False),
                                               GradientBoostingRegressor(n_estimators=5, random_state=0))}[kind]()
    est.fit(x, y)
    core = model_from_dict(export_estimator(est, kind, [f"x{i}" for i in range(x.shape[1])]))
    probe = x[:2].copy()
    probe[1, 2] = value
    with pytest.raises(ValueError, match="infinity or a value too large"):
        est.predict(probe)
    # an infinity behind a scaler is refused by the scaler first (StandardScaler's check of X)
    why = "its input_scaler" if kind == "scaled_gbr" and np.isinf(value) else "float32 inputs, which cannot hold it"
    with pytest.raises(ValueError, match=rf"feature x2 \(index 2\) is .*{why}"):
        core.predict(probe)
    # the largest double that float32 rounds to a finite value is taken, as scikit-learn takes it
    probe[1, 2] = np.nextafter(float.fromhex("0x1.ffffffp+127"), 0) * np.sign(value)
    np.testing.assert_array_equal(core.predict(probe), est.predict(probe))


def test_trees_without_missing_left_send_nan_right() -> None:
    # Files exported before missing_left was written (the shipped ones) keep their meaning.
    from sklearn.tree import DecisionTreeRegressor

    x, y = _data(8)
    est = DecisionTreeRegressor(max_depth=4, random_state=0).fit(x, y)
    doc = json.loads(json.dumps(export_estimator(est, "dt", [f"x{i}" for i in range(x.shape[1])])))
    del doc["model"]["trees"][0]["missing_left"]
    core = model_from_dict(doc)
    t = doc["model"]["trees"][0]
    node = 0
    while t["feature"][node] >= 0:
        node = t["right"][node]
    assert core.predict(np.full((1, x.shape[1]), np.nan))[0] == pytest.approx(t["value"][node], rel=1e-12)


def _mean_doc() -> dict:
    return {"schema": "srift.learned-model/1", "name": "m", "features": ["a"],
            "model": {"type": "mean", "members": [{"model": {"type": "linear", "coef": [1.0], "intercept": 0.0}}]}}


def test_a_mean_model_refuses_a_scaler_of_its_own() -> None:
    # The document's input_scaler was read, then never applied (each member scales its own inputs).
    from srift import _core

    doc = _mean_doc()
    doc["input_scaler"] = {"mean": [100.0], "scale": [2.0]}
    with pytest.raises(ValueError, match=r"\$\.input_scaler: .* is not of type 'null'"):
        validate_model_dict(doc)
    with pytest.raises(ValueError, match=r"\$\.input_scaler must be null for a mean model"):
        _core.LearnedModel.from_json(json.dumps(doc))
    doc["input_scaler"] = None
    assert model_from_dict(doc).predict(np.array([10.0]))[0] == 10.0


@pytest.mark.parametrize("residuals, where", [({"p10": -0.5}, r"\$\.residuals\.p90 is missing"),
                                              ([1, 2], r"\$\.residuals must be an object"),
                                              ({"p10": "x", "p90": 1}, r"\$\.residuals\.p10 must be a number")])
def test_core_reads_residuals_as_the_schema_has_them(residuals: object, where: str) -> None:
    # A lone p10 left p90 at 0 and a list was skipped, where the schema refuses both.
    from srift import _core

    doc = _mean_doc()
    doc["residuals"] = residuals
    with pytest.raises(ValueError, match=r"\$\.residuals"):
        validate_model_dict(doc)
    with pytest.raises(ValueError, match=where):
        _core.LearnedModel.from_json(json.dumps(doc))


def test_core_refuses_an_empty_name() -> None:
    from srift import _core

    doc = _mean_doc()
    doc["name"] = ""
    with pytest.raises(ValueError, match=r"\$\.name"):
        validate_model_dict(doc)
    with pytest.raises(ValueError, match=r"\$\.name must not be empty"):
        _core.LearnedModel.from_json(json.dumps(doc))


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("kind", ["rf", "et", "dt", "mlp", "ridge", "linear", "lasso"])
def test_multi_output_estimators_are_refused(kind: str) -> None:
    # Review: the trees' value[:, 0, 0] kept the first output and dropped the others silently; a
    # multi-output linear model failed in the core with a doubled "learned model: " prefix.
    x, y = _data(10)
    y2 = np.c_[y, -5 * y]
    est = {"rf": lambda: RandomForestRegressor(n_estimators=3, max_depth=3, random_state=0),
           "et": lambda: ExtraTreesRegressor(n_estimators=3, max_depth=3, random_state=0),
           "dt": lambda: DecisionTreeRegressor(max_depth=3, random_state=0),
           "mlp": lambda: MLPRegressor(hidden_layer_sizes=(4,), max_iter=50, random_state=0),
           "ridge": lambda: make_pipeline(StandardScaler(), Ridge()),
           "linear": lambda: LinearRegression(),
           "lasso": lambda: Lasso(alpha=0.01)}[kind]()
    est.fit(x, y2)
    with pytest.raises(ValueError, match=r"cannot export \w+ with (n_outputs_ = 2|2 outputs)"):
        export_estimator(est, kind, [f"x{i}" for i in range(x.shape[1])])
    # one output given as a column is one output
    one = {"linear": LinearRegression, "dt": lambda: DecisionTreeRegressor(max_depth=3, random_state=0)}
    if kind in one:
        single = one[kind]().fit(x, y[:, None])
        core = model_from_dict(export_estimator(single, kind, [f"x{i}" for i in range(x.shape[1])]))
        np.testing.assert_allclose(core.predict(x), np.ravel(single.predict(x)), rtol=1e-9, atol=0)


def test_core_errors_are_prefixed_once() -> None:
    x, y = _data()
    doc = export_estimator(Ridge().fit(x, y), "r", [f"x{i}" for i in range(x.shape[1])])
    doc["model"]["coef"] = doc["model"]["coef"] * 2
    with pytest.raises(ValueError) as info:
        model_from_dict(doc)
    assert str(info.value) == "learned model: $.model.coef must have 6 entries, got 12"
    with pytest.raises(ValueError) as info:
        model_from_dict(doc, "models/r.json")
    assert str(info.value) == "models/r.json: $.model.coef must have 6 entries, got 12"


# csrc/learned.cpp note "scaler inputs": a StandardScaler refuses an infinite input whatever model
# follows it (scikit-learn checks X in its transform; NaN passes as a missing value).
SCALED = {
    "scaled_hgb": lambda: make_pipeline(StandardScaler(), HistGradientBoostingRegressor(max_iter=20, random_state=0)),
    "scaled_ridge": lambda: make_pipeline(StandardScaler(), Ridge()),
    "scaled_mlp": lambda: make_pipeline(StandardScaler(), MLPRegressor(hidden_layer_sizes=(4,), max_iter=50,
                                                                       random_state=0)),
    "mean_of_scaled_and_bare": lambda: VotingRegressor([
        ("hgb", HistGradientBoostingRegressor(max_iter=10, random_state=0)),
        ("scaled", make_pipeline(StandardScaler(), HistGradientBoostingRegressor(max_iter=10, random_state=0)))]),
}


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("value", [np.inf, -np.inf])
@pytest.mark.parametrize("kind", sorted(SCALED))
def test_a_scaled_model_refuses_an_infinite_input_as_scikit_learn_does(kind: str, value: float) -> None:
    # Review: Pipeline(StandardScaler, HistGradientBoostingRegressor) took an infinity in the
    # core (the trees alone take one) where scikit-learn's pipeline raises.
    x, y = _data(11)
    est = SCALED[kind]().fit(x, y)
    core = model_from_dict(json.loads(json.dumps(export_estimator(est, kind, [f"x{i}" for i in range(x.shape[1])]))))
    probe = x[:3].copy()
    probe[2, 1] = value
    with pytest.raises(ValueError, match="Input X contains infinity"):
        est.predict(probe)
    with pytest.raises(ValueError, match=rf"learned model '{kind}': feature x1 \(index 1\) is {value}: its input_scaler "
                                         r"\(scikit-learn's StandardScaler\) takes no infinite input"):
        core.predict(probe)
    # what the scaler takes, the core takes and predicts as scikit-learn does: the finite rows,
    # the largest doubles, and (for the trees, which route it) NaN
    np.testing.assert_allclose(core.predict(probe[:2]), est.predict(probe[:2]), rtol=1e-12, atol=1e-12)
    probe[2, 1] = 1e308 * np.sign(value)
    if kind != "scaled_ridge" and kind != "scaled_mlp":  # those predict an infinity from it: refused as before
        np.testing.assert_array_equal(core.predict(probe), est.predict(probe))
        probe[2, 1] = np.nan
        np.testing.assert_array_equal(core.predict(probe), est.predict(probe))


def test_trees_without_a_scaler_still_take_an_infinity_as_scikit_learn_does() -> None:
    x, y = _data(11)
    est = HistGradientBoostingRegressor(max_iter=20, random_state=0).fit(x, y)
    core = model_from_dict(export_estimator(est, "hgb", [f"x{i}" for i in range(x.shape[1])]))
    probe = x[:2].copy()
    probe[1, 1] = -np.inf
    np.testing.assert_array_equal(core.predict(probe), est.predict(probe))


def test_export_refuses_metadata_the_loader_would_refuse() -> None:
    # "residual" went into the document as is, and a schema without closed objects skipped it
    x, y = _data()
    est = Ridge().fit(x, y)
    names = [f"x{i}" for i in range(x.shape[1])]
    with pytest.raises(ValueError, match=r"metadata 'residual' is not a field of a srift\.learned-model/1 document "
                                         r"named 'r' \(did you mean 'residuals'\?\); known: description, residuals, "
                                         r"target, training \(a record of your own"):
        export_estimator(est, "r", names, residual={"p10": -0.1, "p90": 0.1})
    # the top-level fields are the document's kind's (its name): srift's own models carry more
    with pytest.raises(ValueError, match=r"metadata 'scaling_band' is not a field of a srift\.learned-model/1 "
                                         r"document named 'r' \(a field of iteration_overhead documents\)"):
        export_estimator(est, "r", names, scaling_band={})
    with pytest.raises(ValueError, match=r"metadata 'measured_band' is not a field of a srift\.learned-model/1 "
                                         r"document named 'compute_ratio' \(a field of compute_absolute documents\); "
                                         r"known: absolute_blend, data_edge, description, residuals, "
                                         r"roofline_residuals, target, training"):
        export_estimator(est, "compute_ratio", names, measured_band={})
    assert export_estimator(est, "iteration_overhead", names, scaling_band={})["scaling_band"] == {}
    with pytest.raises(ValueError, match=r"metadata 'model' would replace the model export_estimator writes"):
        export_estimator(est, "r", names, model={"type": "linear", "coef": [0.0] * 6, "intercept": 1.0})
    doc = export_estimator(est, "r", names, target="t", description="d", residuals={"p10": -0.1, "p90": 0.1},
                           training={"anything": {"of": "mine"}})
    model_from_dict(json.loads(json.dumps(doc)))


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_an_unknown_key_in_an_mlp_layer_is_refused_by_the_schema_and_the_core() -> None:
    from srift import _core

    x, y = _data()
    doc = export_estimator(ESTIMATORS["mlp_tanh"]().fit(x, y), "m", [f"x{i}" for i in range(x.shape[1])])
    doc["model"]["layers"][1]["activaton"] = "relu"
    with pytest.raises(ValueError, match=r"\$\.model\.layers\[1\]\.activaton: 'activaton' is not a known field \(did "
                                         r"you mean 'activation'\?\); known here: activation, bias, weights"):
        validate_model_dict(doc)
    with pytest.raises(ValueError, match=r"\$\.model\.layers\[1\]\.activaton is not a known field \(did you mean "
                                         r"'activation'\?\); known here: activation, bias, weights"):
        _core.LearnedModel.from_json(json.dumps(doc))
