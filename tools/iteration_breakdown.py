"""Where one exact-bound iteration spends its time, beside softmax's (README, "The iteration at the cost of
a softmax iteration"): the iteration, its forward-and-backward part alone (everything but the natural step and
the assignment), and the same split for softmax's Adam step.

    python tools/iteration_breakdown.py 26

Graph mode, B = 200, M = 100, D = 36, random data; medians of interleaved calls, as in iteration_profile.py.
"""
import sys

import numpy as np
import tensorflow as tf

from gpflow_augmented.baselines import EXACT_WARM_START, build_method
from gpflow_augmented.benchmark import interleaved_medians
from gpflow_augmented.initialisation import initial_kernel

B, M, D = 200, 100, 36
C = int(sys.argv[1]) if len(sys.argv) > 1 else 6
rng = np.random.default_rng(0)
X_array = rng.standard_normal((B, D))
X, Y = tf.constant(X_array), tf.constant(rng.integers(0, C, (B, 1)))
Z = rng.standard_normal((M, D))
ours = build_method("lsm", initial_kernel(X_array), Z, C, 20 * B)
soft = build_method("softmax", initial_kernel(X_array), Z, C, 20 * B)
for _ in range(EXACT_WARM_START):
    ours.step(X, Y)
model = ours.model
variables = list(model.trainable_variables)

@tf.function
def ours_geometry():
    g = model.batch_geometry(X, None, Y)
    return g.Fmu, g.Fvar

@tf.function
def ours_tape():
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(variables)
        g = model.batch_geometry(X, None, Y)
        tape.watch([g.Fmu, g.Fvar])
        e = model.exact_local_elbo(g.Fmu, g.Fvar, Y, None, g.label_marginals)
        loss = -(model.assemble_elbo(g, e, model.minibatch_scale(X), None) + model.log_prior_density())
    return tape.gradient(loss, [*variables, g.Fmu, g.Fvar])

smodel = soft.model
svars = list(smodel.trainable_variables)

@tf.function
def soft_forward():
    return smodel.training_loss((X, Y))

@tf.function
def soft_grad():
    with tf.GradientTape() as tape:
        loss = smodel.training_loss((X, Y))
    return tape.gradient(loss, svars)

@tf.function
def soft_conditional():
    return smodel.predict_f(X)

steps = {
    "ours: fused iteration": lambda: ours.step(X, Y),
    "ours: tape (geometry+expectation+grads)": ours_tape,
    "ours: geometry forward": ours_geometry,
    "softmax: iteration": lambda: soft.step(X, Y),
    "softmax: loss + grads (no apply)": soft_grad,
    "softmax: loss forward": soft_forward,
    "softmax: predict_f forward": soft_conditional,
}
rounds = [interleaved_medians(steps, repeats=20) for _ in range(3)]
print(f"C={C}")
for k in steps:
    print(f"  {k:42s} {1e3*np.median([r[k] for r in rounds]):7.2f} ms")
