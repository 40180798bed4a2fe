"""Agreement with gradient-trained non-augmented VI, and accuracy on real data."""

import gpflow
import numpy as np
import pytest

import gpflow_augmented as ga
from gpflow_augmented.models import SCHEMES
from helpers import wine

# The integration tier (training on real datasets): run by --slow or -m integration.
pytestmark = pytest.mark.integration


def test_collapsed_matches_gradient_trained_svgp_on_wine(capsys):
    d = wine()
    Z = ga.inducing_points(d.X_train, 30, seed=0)
    kernel = ga.initial_kernel(d.X_train)
    gpflow.utilities.set_trainable(kernel, False)  # fixed hyperparameters: compare posteriors only

    svgp = gpflow.models.SVGP(
        kernel, ga.LogisticSoftmax(3), Z.copy(), num_latent_gps=3, num_data=len(d.X_train)
    )
    gpflow.utilities.set_trainable(svgp.inducing_variable, False)
    loss = svgp.training_loss_closure((d.X_train, d.Y_train))
    result = gpflow.optimizers.Scipy().minimize(
        loss, svgp.trainable_variables, options=dict(maxiter=5000)
    )
    assert result.success, result.message
    reference = svgp.predict_y(d.X_test)[0].numpy()

    distances = {}
    for scheme in SCHEMES:
        model = ga.LogisticSoftmaxSVGP(kernel, Z.copy(), 3, num_data=len(d.X_train), scheme=scheme)
        ga.CAVI(model).iterate((d.X_train, d.Y_train), iterations=200)
        distances[scheme] = np.abs(model.predict_y(d.X_test)[0].numpy() - reference)
    with capsys.disabled():
        for scheme, dist in distances.items():
            print(f"\n[wine] {scheme}: max |p - p_VI| = {dist.max():.4f}, mean {dist.mean():.4f}")
    assert distances["negative-multinomial"].max() < 0.05
    assert distances["negative-multinomial"].max() < distances["gamma-poisson"].max()


@pytest.mark.slow
def test_satimage_error_close_to_paper(capsys):
    d = ga.datasets.load_dataset("satimage")  # bundled, official 4435/2000 split
    model = ga.LogisticSoftmaxSVGP(
        ga.initial_kernel(d.X_train),
        ga.inducing_points(d.X_train, 200, seed=0),
        d.num_classes,
        num_data=len(d.X_train),
    )
    # 250 steps (11 epochs) are enough: after 150, 200, 250, 300 and 1000 steps the test error is
    # 0.106-0.110 (0.1065 after both 250 and 1000, as seeded here), and the NLL after 250 is
    # within 0.01 nats of that after 1000 (0.270 against 0.262). A model that has not learned is
    # outside the band: 0.178 after 1 step, 0.144 after 50.
    ga.fit(model, (d.X_train, d.Y_train), iterations=250, batch_size=200, progress=False, seed=0)
    p = model.predict_y(d.X_test)[0].numpy()
    error = ga.metrics.error_rate(p, d.Y_test)
    nll = ga.metrics.mean_nll(model.predict_log_density((d.X_test, d.Y_test)).numpy())
    with capsys.disabled():
        print(f"\n[satimage] test error {error:.4f} (paper 0.12), NLL {nll:.4f}")
    assert abs(error - 0.12) <= 0.02
