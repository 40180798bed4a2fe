"""The benchmark studies, apart from the installed library: the stability suite
(:mod:`benchmarks.stability`), the step-time scaling (:mod:`benchmarks.scaling`) and the HLO export
for another XLA client (:mod:`benchmarks.hlo_export`). They use ``gpflow_augmented``; the library
never imports them, and the wheel does not carry them. Run from the repository's root:
``python -m benchmarks --help``."""
