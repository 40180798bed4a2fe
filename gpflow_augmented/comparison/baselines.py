"""
The methods of a head-to-head comparison, each a model plus the optimizer that trains it, built by
the package so that every method starts from the same place and is driven the same way.

Each method is one :class:`MethodSpec` in :data:`METHOD_SPECS`, whose ``description`` names its
model and optimizer; the user guide's comparison page tabulates them: ``lsm`` and
``lsm-gamma-poisson`` (this package's CAVI step + Adam), GPflow's ``rm`` (robust-max +
``NaturalGradient``), ``softmax`` and ``lsm-vi`` (Adam on everything), ``dirichlet`` (Milios et al.
2018), ``sep`` (the Heaviside likelihood by stochastic EP), ``rmgpc`` (a full GP, robust EP) and,
for binary tasks, ``xgpc`` and ``bernoulli``.

What every method shares, by construction in :func:`build_method`: the kernel class and its initial
hyperparameters, the inducing points (fixed or trained for all alike), a whitened q(u) starting at
N(0, I), and ``tf.function`` compilation of its step. The caller feeds the same minibatches to all
(:class:`~gpflow_augmented.comparison.MinibatchStream`). Adam's learning rate is each method's own,
chosen for every method by the same rule on validation splits (:func:`method_learning_rate`),
unless the caller gives one rate to all.
"""

import dataclasses
from typing import (
    Any,
    Callable,
    Dict,
    FrozenSet,
    Mapping,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    Union,
)

import gpflow
import numpy as np
import tensorflow as tf
from gpflow.config import default_float
from gpflow.inducing_variables import InducingPoints, SharedIndependentInducingVariables
from gpflow.kernels import Kernel, SeparateIndependent
from gpflow.utilities import set_trainable

from ..likelihoods import LogisticSoftmax, MeanFieldGammaPoisson
from ..models import BinaryLogisticSVGP, LogisticSoftmaxSVGP
from ..schedules import ConstantStepSize, RobbinsMonro, StepSizeSchedule
from ..bounds import AUGMENTED_LEARNING_RATE, EXACT_LEARNING_RATE, EXACT_WARM_START, ExactBound
from ..validation import check_positive_number
from .methods import (
    AdamMethod,
    AugmentedMethod,
    ExpectationPropagationMethod,
    Method,
    NaturalGradientMethod,
)
from .dirichlet import DEFAULT_ALPHA_EPSILON, DirichletClassification
from .rmgpc import RobustMulticlassEP
from .sep import HeavisideSEP

__all__ = [
    "METHODS",
    "check_method_names",
    "AUGMENTED_METHODS",
    "BINARY_METHODS",
    "DAMPED_METHODS",
    "DEFAULT_MULTICLASS_METHODS",
    "DEFAULT_POSITIVE_BIJECTOR",
    "METHOD_SPECS",
    "MethodSpec",
    "BuildInputs",
    "UNSWEPT_LEARNING_RATE",
    "POSITIVE_BIJECTORS",
    "EXACT_BOUND_METHODS",
    "FULL_GP_MAX_POINTS",
    "FULL_GP_METHODS",
    "MULTICLASS_METHODS",
    "default_methods",
    "STEP_SIZE_SCHEDULES",
    "build_method",
    "check_full_gp_method",
    "check_method_options",
    "method_learning_rate",
    "method_positive_bijector",
]

# Parallel EP updates every site at once; undamped, the full-batch sites oscillate.
_FULL_BATCH_EP_DAMPING = 0.5
# A full GP's step costs O(C N³) time and O(C N²) memory (several [C, N, N] arrays, and their
# gradients): the largest training set a comparison gives it. One step on segment (C = 7) took
# 3.4-3.7 s and 1.8 GiB at N = 1000, 22.9 s and 4.1 GiB at N = 1848, 52.9 s and 6.3 GiB at 2500
# (about 130 bytes per entry of C N², so 1000 points of 26 classes would need about 4.4 GiB).
FULL_GP_MAX_POINTS = 1000
# How every positive parameter of a method (the kernel's variance and lengthscales, a likelihood's
# noise) is kept positive: GPflow's `positive_bijector` setting. Like a learning rate it is a
# setting of the optimisation, chosen for all methods alike or tuned on the validation split:
# softplus moves a large value by about Adam's learning rate a step, exp by that fraction of it.
POSITIVE_BIJECTORS = ("softplus", "exp")
# GPflow's default, kept by the methods whose choice was not measured.
DEFAULT_POSITIVE_BIJECTOR = "softplus"
# Adam's learning rate of a peer whose rate was not swept: GPflow's customary 0.01.
UNSWEPT_LEARNING_RATE = 0.01
# The package's method and the GPflow models a user would otherwise pick; the variants on request.
DEFAULT_MULTICLASS_METHODS = ("lsm", "rm", "softmax", "lsm-vi")
# The ρ schedules a comparison can give the CAVI methods on minibatches, by name. The first is the
# default; the constant ones let q(u) keep tracking hyperparameters that are still moving.
STEP_SIZE_SCHEDULES: Dict[str, StepSizeSchedule] = {
    "robbins-monro": RobbinsMonro(),
    "constant-0.1": ConstantStepSize(0.1),
    "constant-0.3": ConstantStepSize(0.3),
}


def method_learning_rate(name: str) -> float:
    """Adam's learning rate of method ``name`` at its defaults (:attr:`MethodSpec.learning_rate`):
    this package's methods take the library's default for their bound
    (:attr:`~gpflow_augmented.bounds.Bound.learning_rate`), the peers the rate chosen on
    validation splits, :data:`UNSWEPT_LEARNING_RATE` where none was swept."""
    return METHOD_SPECS[name].learning_rate


def method_positive_bijector(name: str) -> str:
    """The positive bijector method ``name`` keeps its positive parameters with at its defaults
    (:attr:`MethodSpec.positive_bijector`)."""
    return METHOD_SPECS[name].positive_bijector


def default_methods(num_classes: int) -> Tuple[str, ...]:
    """The methods a comparison runs when none are named: the binary pair for C = 2 (the
    multi-class methods also accept C = 2 when asked for), else the package's method beside the
    GPflow models a user would otherwise pick (:data:`DEFAULT_MULTICLASS_METHODS`)."""
    return BINARY_METHODS if num_classes == 2 else DEFAULT_MULTICLASS_METHODS


class BuildInputs(NamedTuple):
    """What :func:`build_method` gives a method's builder, checked."""

    kernel: Kernel
    Z: np.ndarray  # a copy of the inducing inputs, in GPflow's float type
    num_classes: int
    num_data: int
    learning_rate: float
    rho: Union[float, StepSizeSchedule]  # a CAVI method's ρ: 1 on the full batch, else schedule
    schedule: StepSizeSchedule  # the named ρ schedule on minibatches
    full_batch: bool
    train_inducing_points: bool
    class_subset_size: Optional[int]
    alpha_epsilon: Optional[float]
    update_variance: Optional[bool]
    data: Optional[Tuple[np.ndarray, np.ndarray]]


@dataclasses.dataclass(frozen=True)
class MethodSpec:
    """One method of a comparison, everything the comparison knows of it in one record: its name
    and description, the builder that makes it, the defaults of its optimisation, which labels it
    takes and which options; every check of a method and its options reads this record."""

    name: str
    description: str
    build: Callable[["MethodSpec", BuildInputs], Method]
    #: Adam's learning rate at the method's defaults
    learning_rate: float
    #: what its builder reads (the scheme, the likelihood, the optimiser of q(u), ...)
    settings: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    #: the optional options of :func:`build_method` it takes (others are refused by name)
    options: FrozenSet[str] = frozenset()
    #: labels 0/1 only (C = 2)
    binary: bool = False
    #: this package's model, trained by CAVI + Adam
    ours: bool = False
    #: on the exact bound (ours)
    exact_bound: bool = False
    #: a full GP on the training set it holds: full batch only, at most FULL_GP_MAX_POINTS points
    full_gp: bool = False
    #: its positive bijector at its defaults: exp where, at the method's own learning rate, it
    #: lowers the geometric-mean validation NLL over ten datasets by more than 2.5 % (the margin
    #: the learning rates called close), else GPflow's softplus. Measured for lsm, sep, rm,
    #: softmax, lsm-vi and dirichlet; only softmax gained (docs/benchmarks.md, "How each
    #: method's defaults were chosen").
    positive_bijector: str = DEFAULT_POSITIVE_BIJECTOR


def _variance_option(inputs: BuildInputs) -> Dict[str, Any]:
    return {} if inputs.update_variance is None else {"update_variance": inputs.update_variance}


def _build_logistic_softmax(spec: MethodSpec, inputs: BuildInputs) -> Method:
    scheme = spec.settings["scheme"]
    mean_function = gpflow.mean_functions.Constant() if spec.settings["constant_mean"] else None
    likelihood = LogisticSoftmax(
        inputs.num_classes,
        class_weights=spec.settings.get("class_weights", False),
        augmentation=MeanFieldGammaPoisson() if scheme == "gamma-poisson" else None,
    )
    model = LogisticSoftmaxSVGP(
        inputs.kernel,
        inputs.Z,
        inputs.num_classes,
        num_data=inputs.num_data,
        scheme=scheme,
        mean_function=mean_function,
        likelihood=likelihood,
    )
    set_trainable(model.inducing_variable, inputs.train_inducing_points)
    options = _variance_option(inputs)
    if scheme == "exact":
        options["warm_start_iterations"] = EXACT_WARM_START
    if "class_subset_size" in spec.options:
        # at least 2: the exact bound's subset estimate needs a class besides a point's own
        options["class_subset_size"] = inputs.class_subset_size or max(
            2, -(-inputs.num_classes // 4)
        )
    if spec.settings.get("exact_hyperparameters"):
        options["hyperparameter_bound"] = ExactBound()
    return AugmentedMethod(spec.name, model, inputs.learning_rate, inputs.rho, **options)


def _build_binary_logistic(spec: MethodSpec, inputs: BuildInputs) -> Method:
    model = BinaryLogisticSVGP(inputs.kernel, inputs.Z, num_data=inputs.num_data)
    set_trainable(model.inducing_variable, inputs.train_inducing_points)
    return AugmentedMethod(
        spec.name, model, inputs.learning_rate, inputs.rho, **_variance_option(inputs)
    )


def _build_sep(spec: MethodSpec, inputs: BuildInputs) -> Method:
    model = HeavisideSEP(inputs.kernel, inputs.Z, inputs.num_classes, num_data=inputs.num_data)
    set_trainable(model.inducing_variable, inputs.train_inducing_points)
    damping = _FULL_BATCH_EP_DAMPING if inputs.full_batch else inputs.schedule
    return ExpectationPropagationMethod(spec.name, model, inputs.learning_rate, damping)


def _build_full_gp(spec: MethodSpec, inputs: BuildInputs) -> Method:
    if inputs.data is None:
        raise ValueError(f"method {spec.name!r} is a full GP: build it on its training set (data=)")
    check_full_gp_method(
        spec.name, len(inputs.data[0]), inputs.full_batch, inputs.train_inducing_points
    )
    model = RobustMulticlassEP(inputs.data, inputs.kernel, inputs.num_classes)
    return ExpectationPropagationMethod(
        spec.name, model, inputs.learning_rate, _FULL_BATCH_EP_DAMPING
    )


def _build_svgp(spec: MethodSpec, inputs: BuildInputs) -> Method:
    likelihood = spec.settings["likelihood"](inputs)
    # Full q_sqrt (not q_diag): NaturalGradient needs it, and the augmented model has it too.
    num_latent_gps = 1 if spec.binary else inputs.num_classes
    mean_function = gpflow.mean_functions.Constant() if spec.settings["constant_mean"] else None
    # A kernel per class shares the inducing inputs through GPflow's multi-output wrapper.
    inducing = (
        SharedIndependentInducingVariables(InducingPoints(inputs.Z))
        if isinstance(inputs.kernel, SeparateIndependent)
        else inputs.Z
    )
    model = gpflow.models.SVGP(
        inputs.kernel,
        likelihood,
        inducing,
        num_latent_gps=num_latent_gps,
        num_data=inputs.num_data,
        whiten=True,
        mean_function=mean_function,
    )
    set_trainable(model.inducing_variable, inputs.train_inducing_points)
    if spec.settings["natural_gradient"]:
        return NaturalGradientMethod(spec.name, model, inputs.learning_rate)
    return AdamMethod(spec.name, model, inputs.learning_rate)


def _lsm(name: str, description: str, scheme: str, **settings: Any) -> MethodSpec:
    """One of this package's logistic-softmax methods."""
    exact = scheme == "exact"
    options = {"step_size", "update_variance"}
    if settings.pop("class_subsets", False):
        options.add("class_subset_size")
    return MethodSpec(
        name,
        description,
        _build_logistic_softmax,
        EXACT_LEARNING_RATE if exact else AUGMENTED_LEARNING_RATE,
        settings={"scheme": scheme, "constant_mean": exact, **settings},
        options=frozenset(options),
        ours=True,
        exact_bound=exact,
    )


def _svgp(
    name: str,
    description: str,
    likelihood: Callable[[BuildInputs], Any],
    learning_rate: float,
    *,
    natural_gradient: bool,
    constant_mean: bool = False,
    **fields: Any,
) -> MethodSpec:
    """A peer built on GPflow's ``SVGP``."""
    settings = {
        "likelihood": likelihood,
        "natural_gradient": natural_gradient,
        "constant_mean": constant_mean,
    }
    return MethodSpec(name, description, _build_svgp, learning_rate, settings=settings, **fields)


# Every method, in the order a comparison lists them. The peers' learning rates: of 0.01, 0.03 and
# 0.1, the one with the lowest geometric-mean validation NLL over ten datasets, over two seeds
# where seed 0's best two were within 2.5 % (docs/benchmarks.md, "How each method's defaults were
# chosen"), the rule
# and grid that chose this package's (bounds.EXACT_LEARNING_RATE).
METHOD_SPECS: Dict[str, MethodSpec] = {
    spec.name: spec
    for spec in (
        _lsm(
            "lsm",
            "logistic-softmax, exact bound: closed-form natural step on exact sites + Adam on "
            "the exact ELBO, constant prior mean",
            "exact",
        ),
        _lsm(
            "lsm-subsets",
            "as lsm, each step updating a random subset of the classes (class_subset_size, "
            "default ⌈C/4⌉, at least 2)",
            "exact",
            class_subsets=True,
        ),
        _lsm(
            "lsm-zero-mean", "as lsm, with GPflow's zero prior mean", "exact", constant_mean=False
        ),
        _lsm(
            "lsm-weighted",
            "as lsm, with class weights θ updated in closed form by CAVI",
            "exact",
            class_weights=True,
        ),
        _lsm(
            "lsm-negative-multinomial",
            "logistic-softmax, augmented (negative-multinomial bound): CAVI + Adam",
            "negative-multinomial",
        ),
        _lsm(
            "lsm-gamma-poisson",
            "logistic-softmax, augmented (paper's Gamma-Poisson scheme): CAVI + Adam",
            "gamma-poisson",
        ),
        _lsm(
            "lsm-hyp-exact",
            "logistic-softmax, augmented (negative-multinomial) CAVI + Adam on the exact ELBO",
            "negative-multinomial",
            exact_hyperparameters=True,
        ),
        _svgp(
            "rm",
            "SVGP + robust-max (gpflow MultiClass): NaturalGradient with γ warm-up + Adam",
            lambda inputs: gpflow.likelihoods.MultiClass(inputs.num_classes),
            0.03,
            natural_gradient=True,
        ),
        _svgp(
            "softmax",
            "SVGP + softmax (gpflow Softmax, Monte Carlo): Adam",
            lambda inputs: gpflow.likelihoods.Softmax(inputs.num_classes),
            0.03,
            natural_gradient=False,
            positive_bijector="exp",
        ),
        _svgp(
            "lsm-vi",
            "SVGP + logistic-softmax, not augmented: Adam",
            lambda inputs: LogisticSoftmax(inputs.num_classes),
            0.1,
            natural_gradient=False,
        ),
        _svgp(
            "dirichlet",
            "Dirichlet GP classification (Milios et al. 2018): SVGP regression on transformed "
            "labels, NaturalGradient with γ warm-up + Adam",
            lambda inputs: DirichletClassification(
                inputs.num_classes,
                DEFAULT_ALPHA_EPSILON if inputs.alpha_epsilon is None else inputs.alpha_epsilon,
            ),
            0.1,
            natural_gradient=True,
            constant_mean=True,
            options=frozenset({"alpha_epsilon"}),
        ),
        MethodSpec(
            "sep",
            "Heaviside likelihood, stochastic EP (Villacampa-Calvo 2017): damped EP step + Adam "
            "on the EP estimate of log p(y)",
            _build_sep,
            0.01,
            options=frozenset({"step_size"}),
        ),
        MethodSpec(
            "rmgpc",
            "robust multi-class GPC (Hernández-Lobato 2011): full GP, Heaviside likelihood with "
            "explicit label outliers, damped EP step + Adam on the EP estimate of log p(y); "
            "full batch only",
            _build_full_gp,
            UNSWEPT_LEARNING_RATE,
            full_gp=True,
        ),
        MethodSpec(
            "xgpc",
            "binary logistic, Pólya-Gamma augmented (X-GPC): CAVI + Adam",
            _build_binary_logistic,
            AUGMENTED_LEARNING_RATE,
            options=frozenset({"step_size", "update_variance"}),
            binary=True,
            ours=True,
        ),
        _svgp(
            "bernoulli",
            "SVGP + Bernoulli(sigmoid): NaturalGradient with γ warm-up + Adam",
            lambda inputs: gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid),
            UNSWEPT_LEARNING_RATE,
            natural_gradient=True,
            binary=True,
        ),
    )
}

# Views of the registry, by what a caller asks of it.
METHODS: Dict[str, str] = {name: spec.description for name, spec in METHOD_SPECS.items()}
BINARY_METHODS = tuple(name for name, spec in METHOD_SPECS.items() if spec.binary)
MULTICLASS_METHODS = tuple(name for name, spec in METHOD_SPECS.items() if not spec.binary)
EXACT_BOUND_METHODS = tuple(name for name, spec in METHOD_SPECS.items() if spec.exact_bound)
AUGMENTED_METHODS = tuple(name for name, spec in METHOD_SPECS.items() if spec.ours)
# The methods whose q(u) moves by a step size ρ that a schedule can set on minibatches.
DAMPED_METHODS = tuple(name for name, spec in METHOD_SPECS.items() if "step_size" in spec.options)
FULL_GP_METHODS = tuple(name for name, spec in METHOD_SPECS.items() if spec.full_gp)


def build_method(
    name: str,
    kernel: Kernel,
    inducing_points: np.ndarray,
    num_classes: int,
    num_data: int,
    *,
    learning_rate: Optional[float] = None,
    train_inducing_points: bool = False,
    full_batch: bool = False,
    step_size: Optional[str] = None,
    class_subset_size: Optional[int] = None,
    alpha_epsilon: Optional[float] = None,
    update_variance: Optional[bool] = None,
    data: Optional[Tuple[np.ndarray, np.ndarray]] = None,
) -> Method:
    """Build method ``name`` (a key of :data:`METHOD_SPECS`) around ``kernel`` and a copy of
    ``inducing_points``. Pass each method its own kernel object with the same values.

    ``learning_rate`` is Adam's; default :func:`method_learning_rate`. ``step_size`` names the ρ
    schedule (:data:`STEP_SIZE_SCHEDULES`) of a CAVI method on
    minibatches; on the full batch ρ = 1 (exact coordinate ascent). ``class_subset_size`` is
    the number of classes ``lsm-subsets`` updates per step; ``alpha_epsilon`` is the α_ε of
    ``dirichlet`` (default :data:`~gpflow_augmented.comparison.dirichlet.DEFAULT_ALPHA_EPSILON`);
    ``update_variance`` is the :class:`~gpflow_augmented.CAVI` option of this package's methods
    (:data:`AUGMENTED_METHODS`; ``None``: the closed-form variance wherever it applies,
    ``False``: Adam). A method refuses by name an option it does not take.

    A full-GP method (:data:`FULL_GP_METHODS`) is built on ``data = (X, Y)``, the training set it
    then holds and is given at every step (``full_batch`` must be true; ``inducing_points`` is not
    used: its inducing inputs are X, fixed)."""
    learning_rate = check_method_options(
        name,
        learning_rate=learning_rate,
        step_size=step_size,
        class_subset_size=class_subset_size,
        alpha_epsilon=alpha_epsilon,
        update_variance=update_variance,
    )
    spec = METHOD_SPECS[name]
    if data is not None and not spec.full_gp:
        raise ValueError(
            f"method {name!r} takes its data at each step; data= is for the full-GP "
            f"methods ({', '.join(FULL_GP_METHODS)})"
        )
    if spec.binary and num_classes != 2:
        raise ValueError(f"method {name!r} is for binary labels (C = 2), not C = {num_classes}")
    schedule = STEP_SIZE_SCHEDULES[step_size or "robbins-monro"]
    inputs = BuildInputs(
        kernel=kernel,
        Z=np.array(inducing_points, dtype=default_float()),
        num_classes=num_classes,
        num_data=num_data,
        learning_rate=learning_rate,
        rho=1.0 if full_batch else schedule,
        schedule=schedule,
        full_batch=full_batch,
        train_inducing_points=train_inducing_points,
        class_subset_size=class_subset_size,
        alpha_epsilon=alpha_epsilon,
        update_variance=update_variance,
        data=data,
    )
    return spec.build(spec, inputs)


def check_method_names(
    names: Sequence[str], allowed: Sequence[str] = tuple(METHOD_SPECS), what: str = "--methods"
) -> Tuple[str, ...]:
    """The one check of a list of method names, wherever it is given (``what`` names it in the
    message): not empty, each among ``allowed``, none twice."""
    names = tuple(names)
    if not names:
        raise ValueError(f"{what} is empty")
    unknown = [name for name in names if name not in allowed]
    if unknown:
        raise ValueError(f"unknown method {unknown[0]!r}; choose from {', '.join(allowed)}")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"{what} names {repeated[0]!r} twice; each method runs once")
    return names


def check_method_options(
    name: str,
    *,
    learning_rate: Optional[float] = None,
    step_size: Optional[str] = None,
    class_subset_size: Optional[int] = None,
    alpha_epsilon: Optional[float] = None,
    positive_bijector: Optional[str] = None,
    update_variance: Optional[bool] = None,
) -> float:
    """Refuse, naming the method, a method that does not exist or an option it does not take
    (its :class:`MethodSpec`'s ``options``); returns the learning rate, checked
    (:func:`method_learning_rate` where none is given)."""
    check_method_names([name], what="the method")
    spec = METHOD_SPECS[name]
    if positive_bijector is not None and positive_bijector not in POSITIVE_BIJECTORS:
        raise ValueError(
            f"unknown positive bijector {positive_bijector!r} for method {name!r}; "
            f"choose from {', '.join(POSITIVE_BIJECTORS)}"
        )
    if learning_rate is None:
        learning_rate = spec.learning_rate
    learning_rate = check_positive_number(learning_rate, "learning_rate", allow_zero=True)
    given = {
        "step_size": step_size,
        "class_subset_size": class_subset_size,
        "alpha_epsilon": alpha_epsilon,
        "update_variance": update_variance,
    }
    for option, value in given.items():
        if value is not None and option not in spec.options:
            takers = ", ".join(repr(n) for n, s in METHOD_SPECS.items() if option in s.options)
            label = "ρ schedule" if option == "step_size" else option
            raise ValueError(f"method {name!r} has no {label} (an option of {takers})")
    if update_variance is not None and not isinstance(update_variance, (bool, np.bool_)):
        raise TypeError(f"update_variance must be True, False or None, got {update_variance!r}")
    if step_size is not None and step_size not in STEP_SIZE_SCHEDULES:
        raise ValueError(
            f"unknown step size {step_size!r}; choose from {', '.join(STEP_SIZE_SCHEDULES)}"
        )
    return learning_rate


def check_full_gp_method(
    name: str, num_data: int, full_batch: bool, train_inducing_points: bool = False
) -> None:
    """Refuse, naming the method, a full GP on minibatches, on more than
    :data:`FULL_GP_MAX_POINTS` training points, or with trained inducing points."""
    if train_inducing_points:
        raise ValueError(
            f"method {name!r} is a full GP: its inducing inputs are the training "
            "inputs, which are not trained; train_inducing_points is for the sparse "
            "methods"
        )
    if not full_batch:
        raise ValueError(
            f"method {name!r} is a full GP, trained on the whole training set at every step: it "
            f"takes no minibatches (give a batch size of at least N = {num_data})"
        )
    if num_data > FULL_GP_MAX_POINTS:
        raise ValueError(
            f"method {name!r} is a full GP, O(C N³) time and O(C N²) memory per step: N = "
            f"{num_data} training points is more than its limit of {FULL_GP_MAX_POINTS} (sep is "
            "EP for the Heaviside likelihood with inducing points and minibatches)"
        )
