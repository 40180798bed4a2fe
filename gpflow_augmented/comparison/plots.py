"""
The paper's pictures with matplotlib: confidence histograms and reliability diagrams (its Figure 3),
each approximation against the Gibbs ground truth (its Figure 5) and test error / NLL against
training time on a log axis (its Figure 7).

Functions draw on axes they are given, so they also serve ``gpflow.monitor.ImageToTensorBoard``;
the ``*_figure`` helpers build a whole :class:`matplotlib.figure.Figure` without pyplot (no display
needed) for :func:`save_figure`.
"""

from pathlib import Path
from typing import Any, Dict, Mapping, Sequence, Union

import numpy as np

from ..metrics import error_rate
from ..monitoring import plot_reliability_diagram

__all__ = [
    "plot_reliability_diagram",
    "plot_confidence_histogram",
    "calibration_figure",
    "ground_truth_figure",
    "traces_figure",
    "save_figure",
]


def plot_confidence_histogram(
    ax: Any, probabilities: np.ndarray, y: np.ndarray, num_bins: int = 15, title: str = ""
) -> None:
    """The share of test points per confidence bin, with mean accuracy and mean confidence."""
    probabilities = np.asarray(probabilities)
    confidence = probabilities.max(axis=1)
    accuracy = 1.0 - error_rate(probabilities, y)
    weights = np.full(len(confidence), 1.0 / len(confidence))
    ax.hist(
        confidence,
        bins=np.linspace(0, 1, num_bins + 1),
        weights=weights,
        color="tab:blue",
        edgecolor="black",
        linewidth=0.5,
    )
    ax.axvline(accuracy, color="black", linestyle="--", label=f"accuracy {accuracy:.3f}")
    ax.axvline(
        confidence.mean(),
        color="tab:red",
        linestyle=":",
        label=f"mean confidence {confidence.mean():.3f}",
    )
    ax.legend(loc="upper left", fontsize="small")
    ax.set(xlim=(0, 1), xlabel="confidence", ylabel="share of test points", title=title)


def calibration_figure(
    probabilities: Mapping[str, np.ndarray], y: np.ndarray, num_bins: int = 15
) -> Any:
    """Confidence histograms (top row) over reliability diagrams (bottom row), one column per
    method, as in the paper's Figure 3."""
    from matplotlib.figure import Figure

    names = list(probabilities)
    figure = Figure(figsize=(3.2 * len(names), 6.4), layout="constrained")
    axes = np.asarray(figure.subplots(2, len(names), squeeze=False))
    for column, name in enumerate(names):
        plot_confidence_histogram(axes[0, column], probabilities[name], y, num_bins, title=name)
        plot_reliability_diagram(axes[1, column], probabilities[name], y, num_bins)
    return figure


def traces_figure(
    traces: Mapping[str, Sequence[Dict[str, float]]],
    metrics: Sequence[str] = ("error", "nll"),
    title: str = "",
) -> Any:
    """Each metric against training time (log axis), one line per method: the paper's Figure 7.
    Points at time 0 (before training) cannot be drawn on a log axis and are left out."""
    from matplotlib.figure import Figure

    labels = {
        "error": "test error",
        "nll": "test NLL (nats)",
        "ece": "ECE (top-label)",
        "classwise_ece": "ECE (class-wise)",
        "brier": "Brier score",
    }
    figure = Figure(figsize=(5.0 * len(metrics), 3.8), layout="constrained")
    axes = np.atleast_1d(figure.subplots(1, len(metrics)))
    for ax, metric in zip(axes, metrics):
        for name, trace in traces.items():
            points = [(e["time"], e[metric]) for e in trace if e["time"] > 0]
            if points:
                times, values = zip(*points)
                ax.plot(times, values, marker=".", label=name)
        ax.set_xscale("log")
        ax.set(xlabel="training time (s)", ylabel=labels.get(metric, metric))
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize="small")
    if title:
        figure.suptitle(title)
    return figure


def ground_truth_figure(
    summaries: Mapping[str, Any],
    reference: str = "gibbs",
    methods: Sequence[str] = ("vi", "exact", "negative-multinomial", "gamma-poisson"),
) -> Any:
    """Each method's predictive probabilities p, latent means μ and variances σ² (columns) against
    the reference's (x-axis), one row per method, all classes together: the paper's Figure 5.

    :param summaries: method → :class:`~gpflow_augmented.sampling.ground_truth.PosteriorSummary`.
    """
    from matplotlib.figure import Figure

    quantities = [("probabilities", "p"), ("latent_mean", "μ"), ("latent_variance", "σ²")]
    methods = [m for m in methods if m in summaries]
    figure = Figure(figsize=(10.0, 3.2 * len(methods)), layout="constrained")
    axes = np.asarray(figure.subplots(len(methods), 3, squeeze=False))
    truth = summaries[reference]
    for row, method in enumerate(methods):
        for column, (quantity, symbol) in enumerate(quantities):
            x = np.ravel(getattr(truth, quantity))
            y = np.ravel(getattr(summaries[method], quantity))
            ax = axes[row, column]
            low, high = min(x.min(), y.min()), max(x.max(), y.max())
            ax.plot([low, high], [low, high], "k--", linewidth=1)
            ax.scatter(x, y, s=10, alpha=0.7)
            ax.text(0.04, 0.9, f"max |Δ| {np.max(np.abs(y - x)):.3f}", transform=ax.transAxes)
            ax.set(xlabel=f"{symbol} ({reference})", ylabel=f"{symbol} ({method})")
    return figure


def save_figure(figure: Any, path: Union[str, Path]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    return path
