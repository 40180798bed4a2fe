"""Training costs nothing of size N: the compiled step's tensors are batch-sized, and a process
streaming 10⁶ points peaks no higher than one streaming 10⁴. Also a smoke run of the scaling
benchmark and its report."""

import gpflow
import numpy as np
import pytest
import tensorflow as tf

import gpflow_augmented as ga
from benchmarks.scaling import (
    run_scaling,
    scaling_report,
    streamed_fit_memory,
    synthetic_model,
)

# The integration tier (the scaling runs): run by --slow or -m integration.
pytestmark = pytest.mark.integration


def test_compiled_step_holds_no_tensor_of_size_n():
    N, B, D, C, M = 10**6, 64, 5, 4, 12
    model = synthetic_model(C, M, D, num_data=N)
    trainer = ga.Trainer(model, ga.RobbinsMonro(), class_subset_size=2)
    concrete = trainer._iteration.get_concrete_function(
        tf.TensorSpec([B, D], gpflow.config.default_float()), tf.TensorSpec([B, 1], tf.int64)
    )
    largest = 0
    for operation in concrete.graph.get_operations():
        for output in operation.outputs:
            if output.shape.rank:
                largest = max([largest] + [d for d in output.shape.as_list() if d is not None])
    # The largest static dimension is the batch or an M×M matrix flattened (M² = 144), far from N.
    assert largest == max(B, M * M), largest


def test_streamed_training_memory_does_not_grow_with_n():
    small = streamed_fit_memory(10**4, steps=20)
    large = streamed_fit_memory(10**6, steps=20)
    print(small, large)
    assert small["iteration"] == large["iteration"] == 23
    # Holding the 10⁶ × 32 float64 inputs alone would take 256 MB.
    assert large["peak_rss_mb"] - small["peak_rss_mb"] < 64


def test_fit_from_a_dataset_trains_and_needs_num_data():
    stream = ga.datasets.synthetic_stream(2000, 100, 3, 4, seed=1)
    model = synthetic_model(3, 10, 4, num_data=2000)
    result = ga.fit(model, stream, iterations=60, progress=False)
    assert np.mean(result.elbo[-10:]) > np.mean(result.elbo[:10])
    assert int(result.trainer.iteration.numpy()) == 60
    unscaled = synthetic_model(3, 10, 4, num_data=2000)
    unscaled.num_data = None
    with pytest.raises(ValueError, match="num_data"):
        ga.fit(unscaled, stream, iterations=1, progress=False)


@pytest.mark.slow
def test_quick_scaling_run_writes_its_tables(tmp_path):
    results = run_scaling(str(tmp_path), quick=True)
    report = (tmp_path / "scale.md").read_text()
    assert report == scaling_report(results)
    assert "fitted exponent" in report and "Roofline" in report
    for row in results["classes"] + results["roofline"]:
        assert all(value > 0 for value in row.values())
    assert results["precision"]["max_abs_dp"] < 0.05
