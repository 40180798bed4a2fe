"""
The X-GPC stopping rule (Wenzel et al. 2019, §5): stop when a sliding-window average of the relative
change of the global parameters falls under a threshold.

The global parameters are q(u)'s ``q_mu`` and ``q_sqrt``; the relative change of one step is
‖θ_t - θ_{t-1}‖ / ‖θ_{t-1}‖ over both together. Checking it reads q(u) back to the host once per
step, which is why it is an option of :func:`~gpflow_augmented.fit` and not part of the step.
"""

from collections import deque
from typing import Any, Deque, Optional

import numpy as np

__all__ = ["GlobalParameterConvergence"]


class GlobalParameterConvergence:
    """Converged once the mean relative change of q(u) over the last ``window`` steps is below
    ``threshold``.

    :param threshold: default 1e-4, the paper's value.
    :param window: the number of steps averaged (default 5).
    """

    def __init__(self, threshold: float = 1e-4, window: int = 5) -> None:
        if not float(threshold) > 0:
            raise ValueError(f"threshold must be positive, got {threshold!r}")
        if int(window) != window or window < 1:
            raise ValueError(f"window must be a positive integer, got {window!r}")
        self.threshold = float(threshold)
        self.window = int(window)
        self._previous: Optional[np.ndarray] = None
        self._changes: Deque[float] = deque(maxlen=self.window)

    @property
    def average_change(self) -> float:
        """The mean relative change over the window (inf until the window is full)."""
        if len(self._changes) < self.window:
            return float("inf")
        return float(np.mean(self._changes))

    def update(self, model: Any) -> bool:
        """Record the model's current q(u); return whether the rule says stop."""
        current = np.concatenate([np.ravel(model.q_mu.numpy()), np.ravel(model.q_sqrt.numpy())])
        if self._previous is not None:
            scale = np.linalg.norm(self._previous)
            change = np.linalg.norm(current - self._previous)
            self._changes.append(float(change / scale) if scale > 0 else float("inf"))
        self._previous = current
        return self.average_change < self.threshold
