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
    "rank_figure",
    "anytime_figure",
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


def rank_figure(
    methods: Sequence[str], average_ranks: Sequence[float], critical_difference: float
) -> Any:
    """A critical-difference diagram (Demšar 2006): each method at its average rank on one axis,
    the best on the left, a bar of Nemenyi's critical difference, and a bar joining each group of
    methods closer than it (not told apart)."""
    from matplotlib.figure import Figure

    order = np.argsort(average_ranks)
    figure = Figure(figsize=(7.0, 1.0 + 0.35 * len(methods)), layout="constrained")
    ax = figure.subplots()
    k = len(methods)
    ax.set_xlim(0.5, k + 0.5)
    ax.set_ylim(-len(methods) - 1.0, 1.5)
    ax.axhline(0.0, color="k", linewidth=1)
    for position, i in enumerate(order):
        rank = average_ranks[i]
        ax.plot([rank, rank], [0.0, -position - 1.0], color="k", linewidth=0.8)
        ax.text(rank + 0.05, -position - 1.0, f"{methods[i]} ({rank:.2f})", va="center")
    # Groups the test cannot tell apart: each longest run of methods within the critical
    # difference of its first, drawn as a bar above the axis (Demšar's cliques).
    ranks = [average_ranks[i] for i in order]
    reach = 0
    for start in range(len(ranks)):
        end = max(j for j in range(len(ranks)) if ranks[j] - ranks[start] <= critical_difference)
        if end > start and end > reach:
            height = 0.15 + 0.12 * (start % 3)
            ax.plot([ranks[start], ranks[end]], [height, height], color="k", linewidth=3)
            reach = end
    best = ranks[0]
    ax.plot([best, best + critical_difference], [1.0, 1.0], color="C3", linewidth=3)
    ax.text(best, 1.25, f"critical difference {critical_difference:.2f}", fontsize="small")
    ax.set_yticks([])
    ax.set_xlabel("average rank (1 = lowest test NLL)")
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    return figure


def anytime_figure(curves: Mapping[str, Mapping[str, Sequence[Sequence[Sequence[float]]]]]) -> Any:
    """Test NLL against training time, a panel a dataset: each method's median over seeds and the
    band between the lowest and highest seed.

    :param curves: dataset → method → one [time, NLL] trace a seed.
    """
    from matplotlib.figure import Figure

    columns = min(4, len(curves))
    rows = -(-len(curves) // columns)
    figure = Figure(figsize=(4.0 * columns, 3.2 * rows), layout="constrained")
    axes = np.asarray(figure.subplots(rows, columns, squeeze=False)).ravel()
    for ax, (dataset, methods) in zip(axes, sorted(curves.items())):
        for index, (name, traces) in enumerate(sorted(methods.items())):
            grid, values = _on_common_grid(traces)
            if len(grid):
                ax.plot(grid, np.median(values, axis=0), color=f"C{index}", label=name)
                ax.fill_between(grid, values.min(0), values.max(0), color=f"C{index}", alpha=0.2)
        ax.set(xscale="log", yscale="log", title=dataset, xlabel="training time (s)")
        ax.set_ylabel("test NLL (nats)")
        ax.grid(True, which="both", alpha=0.3)
    for ax in axes[len(curves) :]:
        ax.set_visible(False)
    axes[0].legend(fontsize="small")
    return figure


def _on_common_grid(traces: Sequence[Sequence[Sequence[float]]]) -> Any:
    """Each seed's trace read at the same times (the value of its last entry at or before each),
    over the times every seed covers."""
    positive = [np.asarray([p for p in trace if p[0] > 0], dtype=float) for trace in traces]
    positive = [t for t in positive if len(t)]
    if not positive:
        return np.zeros(0), np.zeros((0, 0))
    start = max(t[0, 0] for t in positive)
    stop = min(t[-1, 0] for t in positive)
    grid = np.geomspace(start, max(stop, start), 50)
    values = np.stack(
        [t[np.maximum(np.searchsorted(t[:, 0], grid, side="right") - 1, 0), 1] for t in positive]
    )
    return grid, values


def save_figure(figure: Any, path: Union[str, Path]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    return path
