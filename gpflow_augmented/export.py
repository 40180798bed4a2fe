"""
A trained model as a ``tf.saved_model``, GPflow's documented way to keep a model: compiled
``predict_f`` and ``predict_y`` with a fixed input signature, loadable without this package's
Python code (``loaded = tf.saved_model.load(path)``, then ``loaded.predict_y(X)``: the loaded
object must be held while its functions run, which :func:`load_model`'s :class:`LoadedModel` does),
and the ``gpflow-augmented predict`` command.

The features a model was trained on are usually standardised; pass the training mean and scale
(e.g. from :func:`~gpflow_augmented.datasets.from_arrays`' statistics) and the exported functions
take raw rows.
"""

import json
import shutil
from pathlib import Path
from typing import Any, Optional, Sequence, Union

import numpy as np
import tensorflow as tf
from gpflow.config import default_float

__all__ = [
    "export_model",
    "load_model",
    "read_metadata",
    "METADATA",
    "LoadedModel",
]

METADATA = "gpflow_augmented.json"


class _Predictor(tf.Module):
    def __init__(self, model: Any, feature_mean: np.ndarray, feature_scale: np.ndarray) -> None:
        super().__init__(name="predictor")
        self.model = model
        self.feature_mean = tf.constant(feature_mean, default_float())
        self.feature_scale = tf.constant(feature_scale, default_float())
        spec = tf.TensorSpec([None, len(feature_mean)], default_float(), name="X")
        self.predict_f = tf.function(self._predict_f, input_signature=[spec], autograph=False)
        self.predict_y = tf.function(self._predict_y, input_signature=[spec], autograph=False)

    def _standardised(self, X: tf.Tensor) -> tf.Tensor:
        return (X - self.feature_mean) / self.feature_scale

    def _predict_f(self, X: tf.Tensor) -> dict:
        mean, variance = self.model.predict_f(self._standardised(X))
        return {"mean": mean, "variance": variance}

    def _predict_y(self, X: tf.Tensor) -> dict:
        mean, variance = self.model.predict_y(self._standardised(X))
        return {"mean": mean, "variance": variance}


def export_model(
    model: Any,
    path: Union[str, Path],
    *,
    feature_mean: Optional[Sequence[float]] = None,
    feature_scale: Optional[Sequence[float]] = None,
    class_names: Optional[Sequence[str]] = None,
) -> Path:
    """Save ``model`` (any GPflow model with ``predict_f``/``predict_y``, e.g. a trained
    :class:`~gpflow_augmented.LogisticSoftmaxSVGP`) to the folder ``path`` as a
    ``tf.saved_model`` with the signatures ``predict_f`` and ``predict_y`` (inputs ``X`` [N, D]
    in the model's float type; outputs ``mean`` and ``variance``).

    ``feature_mean``/``feature_scale`` [D]: the standardisation the model was trained under,
    applied inside the exported functions; ``class_names``: a list of one name per class, stored
    for the ``predict`` command's column headers.

    Everything is checked before anything is written, and the folder is written whole or not at
    all: an earlier export at ``path`` is replaced only once the new one is complete, and a failed
    export leaves it as it was. A folder that holds anything but an earlier export is refused."""
    from .projection import inducing_inputs

    input_dim = int(inducing_inputs(model.inducing_variable).shape[-1])
    mean = np.zeros(input_dim) if feature_mean is None else np.asarray(feature_mean, np.float64)
    scale = np.ones(input_dim) if feature_scale is None else np.asarray(feature_scale, np.float64)
    if mean.shape != (input_dim,) or scale.shape != (input_dim,):
        raise ValueError(
            f"feature_mean and feature_scale must have one entry per feature "
            f"({input_dim}), got shapes {mean.shape} and {scale.shape}"
        )
    if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(scale)) and np.all(scale > 0)):
        raise ValueError("feature_mean must be finite and feature_scale finite and > 0")
    path = _export_folder(path)
    predictor = _Predictor(model, mean, scale)
    num_outputs = int(
        predictor.predict_y(tf.zeros([1, input_dim], default_float()))["mean"].shape[-1]
    )
    names = _checked_class_names(class_names, max(num_outputs, 2))
    metadata = {"input_dim": input_dim, "class_names": names, "model": type(model).__name__}
    partial = path.with_name(f".{path.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        tf.saved_model.save(
            predictor,
            str(partial),
            signatures={
                "predict_f": predictor.predict_f.get_concrete_function(),
                "predict_y": predictor.predict_y.get_concrete_function(),
            },
        )
        (partial / METADATA).write_text(json.dumps(metadata, indent=1))
        _replace_folder(partial, path)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return path


def _export_folder(path: Union[str, Path]) -> Path:
    """``path`` as a folder an export may be written to: absent, empty, or an earlier export."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{path} is a file; export_model writes a folder")
    if path.is_dir() and any(path.iterdir()) and not (path / METADATA).is_file():
        raise ValueError(
            f"{path} holds files that are not an export (no {METADATA}); choose an empty or new "
            "folder, or an earlier export to replace"
        )
    return path


def _checked_class_names(class_names: Optional[Sequence[str]], num_classes: int) -> Optional[list]:
    if class_names is None:
        return None
    if isinstance(class_names, (str, bytes)):
        raise TypeError(
            f"class_names must be a list of {num_classes} names, not one string ({class_names!r})"
        )
    names = [str(name) for name in class_names]
    if len(names) != num_classes:
        raise ValueError(
            f"class_names has {len(names)} names, the model predicts {num_classes} classes"
        )
    return names


def _replace_folder(new: Path, path: Path) -> None:
    """Move the complete folder ``new`` to ``path``; an earlier folder there is removed only after
    the new one is in place (a rename each, on one filesystem)."""
    old = path.with_name(f".{path.name}.replaced")
    shutil.rmtree(old, ignore_errors=True)
    if path.exists():
        path.rename(old)
    try:
        new.rename(path)
    except BaseException:
        if old.exists() and not path.exists():
            old.rename(path)
        raise
    shutil.rmtree(old, ignore_errors=True)


def read_metadata(path: Union[str, Path]) -> dict:
    """The ``gpflow_augmented.json`` that :func:`export_model` wrote beside the model, checked:
    ``input_dim`` (a positive integer), ``class_names`` (null or names) and ``model``."""
    from .validation import InvalidDataError

    file = Path(path) / METADATA
    if not file.is_file():
        raise FileNotFoundError(f"{path}: not a folder written by export_model (no {METADATA})")
    try:
        metadata = json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise InvalidDataError(
            f"{file}: not readable JSON ({error}); export the model again"
        ) from None
    if not isinstance(metadata, dict):
        raise InvalidDataError(
            f"{file}: holds a {type(metadata).__name__}, not export_model's "
            "object; export the model again"
        )
    input_dim, names = metadata.get("input_dim"), metadata.get("class_names")
    if isinstance(input_dim, bool) or not isinstance(input_dim, int) or input_dim < 1:
        raise InvalidDataError(f"{file}: input_dim must be a positive integer, got {input_dim!r}")
    if names is not None and not (
        isinstance(names, list) and all(isinstance(n, str) for n in names)
    ):
        raise InvalidDataError(
            f"{file}: class_names must be null or a list of names, got {names!r}"
        )
    return metadata


class LoadedModel:
    """An exported model, loaded by :func:`load_model`: ``predict_f(X)`` and ``predict_y(X)``
    return ``{"mean", "variance"}`` for raw rows ``X`` [N, D]. It holds the loaded object, whose
    variables a saved function needs (``tf.saved_model.load(path).predict_y(X)`` in one
    expression loses them), and checks the number of features first."""

    def __init__(self, loaded: Any, path: Union[str, Path]) -> None:
        #: what ``tf.saved_model.load`` returned, with its ``signatures``
        self.loaded = loaded
        self.path = Path(path)
        spec = loaded.signatures["predict_y"].structured_input_signature[1]["X"]
        #: the number of features a row must have
        self.input_dim = int(spec.shape[-1])
        self._dtype = spec.dtype

    def predict_f(self, X: Any) -> dict:
        """The latent functions' mean and variance [N, P] at the rows ``X``."""
        return self.loaded.predict_f(self._rows(X))

    def predict_y(self, X: Any) -> dict:
        """The class probabilities' mean (and variance) [N, C] at the rows ``X``."""
        return self.loaded.predict_y(self._rows(X))

    def _rows(self, X: Any) -> tf.Tensor:
        X = np.asarray(X, dtype=self._dtype.as_numpy_dtype)
        if X.ndim != 2 or X.shape[1] != self.input_dim:
            raise ValueError(
                f"{self.path}: the model expects rows of {self.input_dim} features, got an array "
                f"of shape {X.shape}"
            )
        return tf.constant(X)


def load_model(path: Union[str, Path]) -> LoadedModel:
    """The exported model, ready to predict. Needs TensorFlow only. When the folder holds
    export_model's metadata, it must describe this model::

        ga.export_model(model, "exported-model")
        probabilities = ga.load_model("exported-model").predict_y(X)["mean"]  # [N, C]
    """
    from .validation import InvalidDataError, first_line

    try:
        model = tf.saved_model.load(str(path))
    except (OSError, tf.errors.NotFoundError, ValueError) as error:
        raise InvalidDataError(f"{path}: not an exported model ({first_line(error)})") from None
    try:
        loaded = LoadedModel(model, path)
    except (KeyError, AttributeError, IndexError, TypeError):
        raise InvalidDataError(
            f"{path}: the saved model has no predict_y(X) signature (not written by export_model)"
        ) from None
    if (Path(path) / METADATA).is_file():
        metadata = read_metadata(path)
        takes = loaded.input_dim
        if takes != metadata["input_dim"]:
            raise InvalidDataError(
                f"{path}: {METADATA} says input_dim {metadata['input_dim']}, but the saved model "
                f"takes {takes} features; the folder's files do not belong together (export the "
                "model again)"
            )
    return loaded
