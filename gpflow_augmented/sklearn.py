"""
A scikit-learn classifier: the package's default model (method ``lsm``) behind ``fit(X, y)``,
``predict_proba(X)`` and the rest of scikit-learn's estimator API, so that it fits in a
``Pipeline``, ``GridSearchCV`` or ``cross_val_score``::

    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from gpflow_augmented.sklearn import GPClassifier

    classifier = make_pipeline(StandardScaler(), GPClassifier()).fit(X, y)
    probabilities = classifier.predict_proba(X_test)

The model is :class:`~gpflow_augmented.LogisticSoftmaxSVGP` on the exact bound with a constant
mean, an SE-ARD kernel started at the median distance (unless ``kernel`` is given), k-means
inducing points and :func:`~gpflow_augmented.fit`'s training: what ``lsm`` runs in the comparison.
The fitted GPflow model is ``model_``.
"""

import copy
from typing import Any, Dict, Optional

import gpflow
import numpy as np
from gpflow.config import default_float
from gpflow.kernels import Kernel, SquaredExponential
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .initialisation import inducing_points, initial_kernel
from .projection import inducing_inputs
from .models import LogisticSoftmaxSVGP
from .training import TrainingReport, fit
from .validation import check_positive_number

__all__ = ["GPClassifier"]


# What builds the model: a warm start after set_params changed one of them fits anew.
_STRUCTURAL_PARAMETERS = ("num_inducing", "kernel", "scheme", "seed")


def _check_label_types(y: Any) -> None:
    """Labels that mix text and numbers ([1, "1", 2.0, "b"]) would be read as text, merging 1 and
    "1", or refused by scikit-learn as of an "unknown" type: name the mix instead."""
    if isinstance(y, np.ndarray) and y.dtype != object:
        return
    values = np.asarray(y, dtype=object).ravel()
    texts = [v for v in values if isinstance(v, (str, bytes))]
    numbers = [
        v for v in values if isinstance(v, (int, float, np.number)) and not isinstance(v, bool)
    ]
    if texts and numbers:
        raise ValueError(
            "the labels mix types: text ("
            + ", ".join(repr(v) for v in texts[:3])
            + ") and numbers ("
            + ", ".join(repr(v) for v in numbers[:3])
            + "); give every label as text or every label as a number"
        )


class GPClassifier(ClassifierMixin, BaseEstimator):
    """Sparse GP classification with the logistic-softmax likelihood, trained by closed-form
    natural-gradient steps on q(u) and Adam on the kernel's other hyperparameters.

    :param num_inducing: M, the number of inducing points (k-means centres of the training
        inputs; at most the number of training points).
    :param kernel: a GPflow kernel to start from (copied at each ``fit``); default an SE-ARD
        kernel with variance 1 and every lengthscale at the median distance between the rows.
    :param scheme: what q(u) steps on, as ``LogisticSoftmaxSVGP``'s: ``"exact"`` (the default:
        closed-form natural-gradient steps on the exact ELBO), ``"negative-multinomial"`` or
        ``"gamma-poisson"`` (CAVI on the likelihood's augmented bounds).
    :param iterations: training steps.
    :param batch_size: minibatch size; ``None`` or at least the number of training points means
        full-batch steps.
    :param learning_rate: Adam's learning rate for the hyperparameters; default the scheme's
        bound's (:data:`~gpflow_augmented.EXACT_LEARNING_RATE` on the exact bound, the one chosen
        for this model).
    :param seed: seeds the inducing points and the minibatch order.
    :param warm_start: a second ``fit`` on data of the same classes and features continues from
        the fitted model instead of starting again.
    :param progress: show a progress bar while fitting.
    """

    # Set by fit: the classes in column order, the trained model, what the steps' safeguards did
    # during the last fit (a TrainingReport; fit warns with a TrainingWarning if it looks bad).
    classes_: np.ndarray
    model_: LogisticSoftmaxSVGP
    report_: TrainingReport

    def __init__(
        self,
        num_inducing: int = 100,
        kernel: Optional[Kernel] = None,
        scheme: str = "exact",
        iterations: int = 1000,
        batch_size: Optional[int] = 200,
        learning_rate: Optional[float] = None,
        seed: int = 0,
        warm_start: bool = False,
        progress: bool = False,
    ) -> None:
        self.num_inducing = num_inducing
        self.kernel = kernel
        self.scheme = scheme
        self.iterations = iterations
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.seed = seed
        self.warm_start = warm_start
        self.progress = progress

    def fit(self, X: Any, y: Any) -> "GPClassifier":
        """Train on ``X`` [N, D] and labels ``y`` [N] of any type; returns the estimator. With
        ``warm_start``, the same model and trainer go on."""
        # A fit that fails (bad data, a failed step, Ctrl-C) leaves the fitted state as it was.
        names = ("n_features_in_", "feature_names_in_", "classes_")
        fitted = {name: getattr(self, name) for name in names if hasattr(self, name)}
        # A warm start trains model_ in place: its values are what a failure restores.
        values = (
            _unconstrained_values(self.model_)
            if self.warm_start and hasattr(self, "model_")
            else None
        )
        try:
            return self._fit(X, y)
        except BaseException:
            for name in names:
                if name in fitted:
                    setattr(self, name, fitted[name])
                elif hasattr(self, name):
                    delattr(self, name)
            if values is not None:
                _assign_unconstrained(self.model_, values)
            raise

    def _fit(self, X: Any, y: Any) -> "GPClassifier":
        # A warm start continues only the model its structural parameters built; after
        # set_params changed one, the fit starts again, as scikit-learn's warm starts do.
        structure = {name: getattr(self, name) for name in _STRUCTURAL_PARAMETERS}
        fitted_structure = getattr(self, "_fitted_structure", None)
        continuing = (
            self.warm_start
            and hasattr(self, "model_")
            and fitted_structure is not None
            and all(
                structure[k] is fitted_structure[k]
                or (k != "kernel" and structure[k] == fitted_structure[k])
                for k in _STRUCTURAL_PARAMETERS
            )
        )
        _check_label_types(y)
        X, y = validate_data(self, X, y, dtype=default_float(), reset=not continuing)
        check_classification_targets(y)
        classes, labels = np.unique(y, return_inverse=True)
        if len(classes) < 2:
            raise ValueError(
                f"{type(self).__name__} needs samples of at least 2 classes; the data "
                f"has only one class: {classes[0]!r}"
            )
        if continuing and not np.array_equal(classes, self.classes_):
            raise ValueError(
                f"warm_start: the data's classes {classes.tolist()} are not those of "
                f"the fitted model {self.classes_.tolist()}"
            )
        if not isinstance(self.num_inducing, (int, np.integer)) or self.num_inducing < 1:
            raise ValueError(f"num_inducing must be a positive integer, got {self.num_inducing!r}")
        if continuing:
            model = self.model_
            if model.num_data != len(X):
                raise ValueError(
                    f"warm_start: the fitted model was trained on {model.num_data} "
                    f"points, this data has {len(X)}"
                )
        else:
            model = self._new_model(X, len(classes))
        # Continuing, the Trainer's Adam moments and step-size schedule go on where they were, at
        # the learning rate asked for now.
        trainer = getattr(self, "trainer_", None) if continuing else None
        if trainer is not None and trainer.adam is not None:
            rate = model.bound.learning_rate if self.learning_rate is None else self.learning_rate
            trainer.learning_rate.assign(check_positive_number(rate, "learning_rate"))
        result = fit(
            model,
            (X, labels[:, None].astype(np.int64)),
            iterations=self.iterations,
            batch_size=self.batch_size,
            learning_rate=self.learning_rate,
            seed=self.seed,
            progress=self.progress,
            trainer=trainer,
        )
        self.classes_, self.model_, self.trainer_ = classes, model, result.trainer
        self._fitted_structure = structure
        assert result.report is not None  # fit always reports
        self.report_ = result.report
        return self

    def _new_model(self, X: np.ndarray, num_classes: int) -> LogisticSoftmaxSVGP:
        # Mostly repeated rows have a median distance of 0: the lengthscale then starts at 1.
        kernel = (
            copy.deepcopy(self.kernel)
            if self.kernel is not None
            else initial_kernel(X, fallback_lengthscale=1.0)
        )
        # k-means has no more distinct centres to give than distinct rows.
        num_inducing = min(self.num_inducing, len(np.unique(X, axis=0)))
        Z = inducing_points(X, num_inducing, seed=self.seed)
        return self._model(kernel, Z, num_classes, len(X))

    def _model(
        self, kernel: Kernel, Z: np.ndarray, num_classes: int, num_data: int
    ) -> LogisticSoftmaxSVGP:
        """The model a fit trains and unpickling rebuilds."""
        return LogisticSoftmaxSVGP(
            kernel,
            Z,
            num_classes,
            num_data=num_data,
            scheme=self.scheme,
            mean_function=gpflow.mean_functions.Constant(),
        )

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities [N, C], columns in the order of ``classes_``."""
        check_is_fitted(self, "model_")
        X = validate_data(self, X, dtype=default_float(), reset=False)
        return self.model_.predict_y(X)[0].numpy()

    def predict_log_proba(self, X: Any) -> np.ndarray:
        """The log of :meth:`predict_proba` [N, C], floored at the smallest positive number."""
        probabilities = self.predict_proba(X)
        return np.log(np.maximum(probabilities, np.finfo(probabilities.dtype).tiny))

    def predict(self, X: Any) -> np.ndarray:
        """The most probable class of each row of ``X`` [N], as a label of ``classes_``."""
        most_probable = np.argmax(self.predict_proba(X), axis=1)  # checks that it was fitted
        return self.classes_[most_probable]

    def __getstate__(self) -> Dict[str, Any]:
        # A GPflow model holds TensorFlow variables and compiled functions, which do not pickle:
        # the state keeps the fitted values, and unpickling rebuilds the model around them.
        state = self.__dict__.copy()
        state.pop("trainer_", None)  # a warm start after unpickling starts a new Trainer
        model = state.pop("model_", None)
        if model is not None:
            state["_fitted_values"] = {
                "model": _unconstrained_values(model),
                "Z": inducing_inputs(model.inducing_variable).numpy(),
                "num_classes": model.num_classes,
                "num_data": model.num_data,
            }
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        fitted = state.pop("_fitted_values", None)
        self.__dict__.update(state)
        if fitted is not None:
            # Any values: the fitted ones are assigned below.
            kernel = (
                SquaredExponential(lengthscales=np.ones(fitted["Z"].shape[1]))
                if self.kernel is None
                else copy.deepcopy(self.kernel)
            )
            model = self._model(kernel, fitted["Z"], fitted["num_classes"], fitted["num_data"])
            _assign_unconstrained(model, fitted["model"])
            self.model_ = model

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        return tags


def _unconstrained_values(model: LogisticSoftmaxSVGP) -> Dict[str, np.ndarray]:
    """Every parameter's unconstrained value, which round-trips bit for bit (a constrained value
    goes through the transform's inverse)."""
    return {
        path: parameter.unconstrained_variable.numpy()
        for path, parameter in gpflow.utilities.parameter_dict(model).items()
    }


def _assign_unconstrained(model: LogisticSoftmaxSVGP, values: Dict[str, np.ndarray]) -> None:
    parameters = gpflow.utilities.parameter_dict(model)
    for path, value in values.items():
        parameters[path].unconstrained_variable.assign(value)
