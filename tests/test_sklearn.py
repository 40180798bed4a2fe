"""The scikit-learn estimator: scikit-learn's own estimator checks, its place in Pipeline /
GridSearchCV / cross_val_score, and agreement with fit + predict_y at the same settings."""

import pickle

import gpflow
import numpy as np
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

import gpflow_augmented as ga
from gpflow_augmented.sklearn import GPClassifier

# The integration tier (scikit-learn's estimator checks train the estimator dozens of times): run by
# --slow or -m integration.
pytestmark = pytest.mark.integration

# Small and quick for the 55 checks, each fitting on tens of points, where ten steps already
# classify them (the accuracy checks pass); a fit's cost is mostly tracing its step. Minibatches of
# a fixed size give the step's quadrature one shape for every check's data, so XLA compiles it once
# per number of classes instead of once per training-set size (the checks took 3 min, not 6).
CHECKED = GPClassifier(num_inducing=10, iterations=10, batch_size=8)


@parametrize_with_checks([CHECKED])
def test_scikit_learns_estimator_checks(estimator, check):
    check(estimator)


def _blobs(seed=0, n=120, num_classes=3):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, num_classes, n)
    X = (
        rng.standard_normal((n, 2)) * 0.6
        + np.stack([np.cos(2 * np.pi * y / num_classes), np.sin(2 * np.pi * y / num_classes)], 1)
        * 2
    )
    return X, y


@pytest.mark.parametrize("scheme", ["exact", "negative-multinomial"])
def test_the_test_nll_equals_fit_and_predict_y_at_the_same_settings(scheme):
    X, y = _blobs(n=160)
    X_test, y_test = X[120:], y[120:]
    X, y = X[:120], y[:120]
    names = np.array(["cat", "dog", "fox"])
    classifier = GPClassifier(num_inducing=15, scheme=scheme, iterations=40, batch_size=50, seed=3)
    classifier.fit(X, names[y])
    model = ga.LogisticSoftmaxSVGP(
        ga.initial_kernel(X),
        ga.inducing_points(X, 15, seed=3),
        3,
        num_data=len(X),
        scheme=scheme,
        mean_function=gpflow.mean_functions.Constant(),
    )
    assert type(classifier.model_.bound) is type(model.bound)
    ga.fit(model, (X, y[:, None]), iterations=40, batch_size=50, seed=3, progress=False)
    nll = -model.predict_log_density((X_test, y_test[:, None])).numpy().mean()
    probabilities = classifier.predict_proba(X_test)
    assert classifier.classes_.tolist() == ["cat", "dog", "fox"]
    # The same model and training: the NLL differs only by predict_y's probabilities against
    # predict_log_density's log-probabilities, both computed from the same q(f).
    assert -np.log(probabilities[np.arange(len(y_test)), y_test]).mean() == pytest.approx(
        nll, abs=1e-10
    )
    np.testing.assert_allclose(
        probabilities, model.predict_y(X_test)[0].numpy(), rtol=0, atol=1e-12
    )
    assert (classifier.predict(X_test) == names[y_test]).mean() > 0.9


@pytest.mark.parametrize(
    "kernel, scheme",
    [(None, "exact"), (gpflow.kernels.Matern32(lengthscales=2.0), "gamma-poisson")],
    ids=["default", "user's kernel, another scheme"],
)
def test_a_pickled_estimator_predicts_the_same(kernel, scheme):
    X, y = _blobs()
    classifier = GPClassifier(num_inducing=10, iterations=20, kernel=kernel, scheme=scheme)
    classifier.fit(X, y)
    restored = pickle.loads(pickle.dumps(classifier))
    np.testing.assert_array_equal(restored.predict_proba(X), classifier.predict_proba(X))
    assert type(restored.model_.kernel) is type(classifier.model_.kernel)
    assert restored.model_.likelihood.augmentation == classifier.model_.likelihood.augmentation


def test_an_unknown_scheme_is_refused_by_name():
    X, y = _blobs()
    with pytest.raises(ValueError, match="scheme"):
        GPClassifier(num_inducing=5, iterations=2, scheme="collapsed").fit(X, y)


def test_it_works_in_a_pipeline_a_grid_search_and_cross_validation():
    from sklearn.metrics import log_loss
    from sklearn.model_selection import GridSearchCV, cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = _blobs(n=90)
    X = X * [1.0, 100.0] + [0.0, 5000.0]  # scales a StandardScaler is for
    pipeline = make_pipeline(StandardScaler(), GPClassifier(num_inducing=8, iterations=20))
    scores = cross_val_score(pipeline, X, y, cv=2)
    assert scores.shape == (2,) and scores.min() > 0.8
    search = GridSearchCV(
        pipeline,
        {"gpclassifier__num_inducing": [4, 8], "gpclassifier__learning_rate": [0.1]},
        cv=2,
        scoring="neg_log_loss",
    ).fit(X, y)
    assert set(search.best_params_) == {"gpclassifier__num_inducing", "gpclassifier__learning_rate"}
    probabilities = search.predict_proba(X)
    assert log_loss(y, probabilities) == pytest.approx(-search.score(X, y))


def test_calibration_display_reads_its_probabilities():
    import matplotlib

    matplotlib.use("Agg")
    from sklearn.calibration import CalibrationDisplay, calibration_curve

    X, y = _blobs(n=120)
    binary = y % 2  # two classes, as a calibration curve needs
    classifier = GPClassifier(num_inducing=8, iterations=20).fit(X, binary)
    display = CalibrationDisplay.from_estimator(classifier, X, binary, n_bins=5)
    expected = calibration_curve(binary, classifier.predict_proba(X)[:, 1], n_bins=5)
    np.testing.assert_array_equal(display.prob_true, expected[0])
    np.testing.assert_array_equal(display.prob_pred, expected[1])


def test_a_warm_start_continues_and_a_failed_fit_keeps_what_was_fitted():
    X, y = _blobs()
    classifier = GPClassifier(num_inducing=10, iterations=10, batch_size=40, warm_start=True)
    classifier.fit(X, y)
    first = classifier.predict_proba(X)
    classifier.fit(X, y)
    assert int(classifier.trainer_.iteration.numpy()) == 20  # the same Trainer went on
    second = classifier.predict_proba(X)
    assert np.abs(second - first).max() > 1e-6
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        classifier.fit(bad, y)
    with pytest.raises(ValueError, match="warm_start: the data's classes"):
        classifier.fit(X, np.where(y == 2, 5, y))
    with pytest.raises(ValueError, match="features"):
        classifier.fit(np.hstack([X, X]), y)
    assert classifier.n_features_in_ == 2
    np.testing.assert_array_equal(classifier.predict_proba(X), second)


def test_labels_that_mix_text_and_numbers_are_named():
    """[1, "1", 2.0, "b"] is refused, naming the mix, not read as the text "1", "1", "2.0", "b"
    (1 and "1" one class) nor refused as an "Unknown label type"."""
    X = np.random.default_rng(0).normal(size=(4, 2))
    for y in ([1, "1", 2.0, "b"], np.array([1, "1", 2.0, "b"], dtype=object)):
        with pytest.raises(
            ValueError, match=r"the labels mix types: text \('1', 'b'\) and numbers"
        ):
            GPClassifier(num_inducing=2, iterations=1, progress=False).fit(X, y)


def test_a_warm_start_uses_what_set_params_changed():
    """set_params between warm-started fits takes effect: a changed learning rate or iteration
    count continues the fit; a changed structural parameter (inducing points, scheme, kernel)
    fits anew."""
    import gpflow

    X, y = _blobs()
    classifier = GPClassifier(num_inducing=10, iterations=5, batch_size=40, warm_start=True)
    classifier.fit(X, y)
    classifier.set_params(learning_rate=0.001, iterations=3).fit(X, y)
    assert int(classifier.trainer_.iteration.numpy()) == 8  # continued
    assert float(classifier.trainer_.learning_rate.numpy()) == pytest.approx(0.001)
    classifier.set_params(num_inducing=5).fit(X, y)
    assert classifier.model_.inducing_variable.num_inducing == 5
    assert int(classifier.trainer_.iteration.numpy()) == 3  # started again
    classifier.set_params(scheme="gamma-poisson").fit(X, y)
    assert classifier.model_.likelihood.augmentation.name == "gamma-poisson"
    classifier.set_params(kernel=gpflow.kernels.Matern12()).fit(X, y)
    assert isinstance(classifier.model_.kernel, gpflow.kernels.Matern12)
