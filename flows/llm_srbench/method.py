"""LLM-SRBench (Shojaee et al., ICML 2025) at laptop scale: the benchmark construction, its metrics, and non-LLM
searchers behind the official ``discover(task) -> equation`` interface.

Benchmark construction, as in the paper:

* **LSR-Transform**: a common physical law ``y = f(x_1..x_n)`` (20 Feynman equations typed in below) is rewritten
  for one of its inputs ``x_k = g(y, x_-k)`` by symbolic solving (``sympy.solve``). A rewrite is kept only when
  exactly one of sympy's solutions reproduces the sampled data (the paper's solvability filter). ID data use the
  Feynman ranges; OOD data push every original input past the top of its range.
* **LSR-Synth**: a known domain term plus one or two synthetic terms drawn from a grammar (chemistry
  ``dA/dt = -kA + s(t, A)``, biology ``dP/dt = rP(1 - P/K) + s(t, P)``, physics ``dv/dt = -w^2 x + s(t, x, v)``,
  materials ``sigma = E eps (1 - a T) + s(eps, T)``). ODEs are simulated with ``scipy.integrate.solve_ivp`` and the
  target is the derivative; later times (or higher temperatures) are OOD. A draw is kept only when it stays finite
  and its own skeleton, refitted, reproduces the data (NMSE < 1e-6).

Metrics, as the official ``bench/pipelines.py``: NMSE = mean((y - y_hat)^2) / var(y) over the non-NaN predictions;
Acc_tau = 1[max_i |y_hat_i - y_i| / |y_i| <= tau]; symbolic accuracy replaces the paper's GPT-4o judge by the
SRBench criterion (La Cava et al., 2021): after rounding constants, ``found - truth`` or ``found / truth`` is a
constant, screened numerically and confirmed by ``sympy.simplify``.

Searchers (one interface, ``Task -> sympy.Expr``):

* ``gplearn``: genetic-programming symbolic regression (gplearn's ``SymbolicRegressor``, the maintained library);
* ``skeleton_search``: LLM-SR without an LLM: skeletons (sums of parameterised terms) are sampled from a grammar
  or mutated from an experience buffer of the best ones, and their parameters are fitted. The skeletons are linear
  in their parameters, so the BFGS optimum of LLM-SR's MSE objective is the least-squares solution, computed exactly;
* ``memorizer``: the stand-in for an LLM that recalls textbook laws: it holds the original forms of all 20 laws,
  tries each with every assignment of the task's inputs to its variables, fits one scale constant, keeps the best;
* ``mean``: the training mean (the NMSE yardstick); ``oracle_skeleton``: the true skeleton with refitted
  parameters (LSR-Synth only: shows the symbolic check recognises a correct form).

Shapes: ``X`` is (n, d) with columns in ``Task.symbols`` order, ``y`` is (n,).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

import numpy as np
import sympy
from gplearn.functions import make_function
from gplearn.genetic import SymbolicRegressor
from scipy.integrate import solve_ivp

from flows.llm_srbench.params import Params
from paperflows.core.seeding import global_rngs_isolated, numpy_rng


@dataclass(frozen=True)
class Law:
    """A Feynman equation ``output = rhs`` with the sampling range of every input (AI Feynman's ranges)."""

    name: str
    output: str
    rhs: str
    ranges: tuple[tuple[str, float, float], ...]


# Ordered so that the first few (the smoke run's) are quick for sympy.solve.
LAWS: tuple[Law, ...] = (
    Law("I.14.3", "U", "m*g*z", (("m", 1, 5), ("g", 1, 5), ("z", 1, 5))),
    Law("I.34.8", "omega", "q*v*B/p", (("q", 1, 5), ("v", 1, 5), ("B", 1, 5), ("p", 1, 5))),
    Law("I.39.22", "P", "n*k_b*T/V", (("n", 1, 5), ("k_b", 1, 5), ("T", 1, 5), ("V", 1, 5))),
    Law("I.12.2", "F", "q_1*q_2/(4*pi*epsilon*r**2)", (("q_1", 1, 5), ("q_2", 1, 5), ("epsilon", 1, 5), ("r", 1, 5))),
    Law("I.6.20a", "f", "exp(-theta**2/2)/sqrt(2*pi)", (("theta", 1, 3),)),
    Law("I.10.7", "m", "m_0/sqrt(1 - v**2/c**2)", (("m_0", 1, 5), ("v", 1, 2), ("c", 3, 10))),
    Law("I.12.11", "F", "q*(E_f + B*v*sin(theta))", (("q", 1, 5), ("E_f", 1, 5), ("B", 1, 5), ("v", 1, 5), ("theta", 1, 3))),
    Law("I.13.4", "K", "m*(v**2 + u**2 + w**2)/2", (("m", 1, 5), ("v", 1, 5), ("u", 1, 5), ("w", 1, 5))),
    Law("I.15.3x", "x_1", "(x - u*t)/sqrt(1 - u**2/c**2)", (("x", 5, 10), ("u", 1, 2), ("c", 3, 20), ("t", 1, 2))),
    Law("I.18.4", "r", "(m_1*r_1 + m_2*r_2)/(m_1 + m_2)", (("m_1", 1, 5), ("m_2", 1, 5), ("r_1", 1, 5), ("r_2", 1, 5))),
    Law("I.24.6", "E", "m*(omega**2 + omega_0**2)*x**2/4", (("m", 1, 3), ("omega", 1, 3), ("omega_0", 1, 3), ("x", 1, 3))),
    Law("I.32.5", "P", "q**2*a**2/(6*pi*epsilon*c**3)", (("q", 1, 5), ("a", 1, 5), ("epsilon", 1, 5), ("c", 1, 5))),
    Law("I.41.16", "L", "h*omega**3/(2*pi**3*c**2*(exp(h*omega/(2*pi*k_b*T)) - 1))",
        (("h", 1, 5), ("omega", 1, 5), ("c", 1, 5), ("k_b", 1, 5), ("T", 1, 5))),
    Law("I.44.4", "E", "n*k_b*T*log(V_2/V_1)", (("n", 1, 5), ("k_b", 1, 5), ("T", 1, 5), ("V_1", 1, 3), ("V_2", 4, 6))),
    Law("I.47.23", "c", "sqrt(gamma*p/rho)", (("gamma", 1, 5), ("p", 1, 5), ("rho", 1, 5))),
    Law("II.11.27", "P", "n*alpha/(1 - n*alpha/3)*epsilon*E_f", (("n", 0.1, 1), ("alpha", 0.1, 1), ("epsilon", 1, 2), ("E_f", 1, 2))),
    Law("II.35.18", "n", "n_0/(exp(mu*B/(k_b*T)) + exp(-mu*B/(k_b*T)))",
        (("n_0", 1, 3), ("mu", 1, 3), ("B", 1, 3), ("k_b", 1, 3), ("T", 1, 3))),
    Law("III.4.33", "E", "h*omega/(2*pi*(exp(h*omega/(2*pi*k_b*T)) - 1))", (("h", 1, 5), ("omega", 1, 5), ("k_b", 1, 5), ("T", 1, 5))),
    Law("I.37.4", "I", "I_1 + I_2 + 2*sqrt(I_1*I_2)*cos(delta)", (("I_1", 1, 5), ("I_2", 1, 5), ("delta", 1, 3))),
    Law("II.2.42", "P", "kappa*(T_2 - T_1)*A/d", (("kappa", 1, 5), ("T_1", 1, 2), ("T_2", 3, 5), ("A", 1, 5), ("d", 1, 5))),
)


def _symbol(name: str) -> sympy.Symbol:
    return sympy.Symbol(name, positive=True)


def law_inputs(law: Law) -> tuple[sympy.Symbol, ...]:
    return tuple(_symbol(name) for name, _, _ in law.ranges)


@lru_cache(maxsize=None)
def law_expr(law: Law) -> sympy.Expr:
    """The law's right-hand side over positive symbols (sympy.solve then drops most sign branches); parsed once."""
    return sympy.parse_expr(law.rhs, local_dict={s.name: s for s in law_inputs(law)})


@dataclass(frozen=True)
class Task:
    """What a searcher sees (the official ``SEDTask``): symbols and training samples, never the truth."""

    name: str
    symbols: tuple[sympy.Symbol, ...]
    X: np.ndarray
    y: np.ndarray


@dataclass(frozen=True)
class Problem:
    """One benchmark problem; ``category`` is ``original``, ``transform`` or ``synth``. Each split is (X, y)."""

    name: str
    category: str
    domain: str
    symbols: tuple[sympy.Symbol, ...]
    truth: sympy.Expr
    train: tuple[np.ndarray, np.ndarray]
    test_id: tuple[np.ndarray, np.ndarray]
    test_id2: tuple[np.ndarray, np.ndarray]
    test_ood: tuple[np.ndarray, np.ndarray]

    def task(self) -> Task:
        return Task(self.name, self.symbols, *self.train)


# ----------------------------------------------------------------------------------------------------------------
# Evaluation: the official metrics and the symbolic check


@lru_cache(maxsize=4096)
def compiled(symbols: tuple[sympy.Symbol, ...], expr: sympy.Expr) -> Callable[..., np.ndarray]:
    """``expr`` as a NumPy function of ``symbols`` (SciPy for special functions such as LambertW). Compiling is
    the slow part of an evaluation, and the same expression is evaluated on several splits: cached."""
    return sympy.lambdify(symbols, expr, ("scipy", "numpy"))


def evaluate(expr: sympy.Expr, symbols: tuple[sympy.Symbol, ...], X: np.ndarray) -> np.ndarray:
    """``expr`` at the rows of ``X`` (n, d): a real (n,) array, NaN where it is undefined or complex."""
    with np.errstate(all="ignore"):
        out = np.asarray(compiled(tuple(symbols), expr)(*X.T))
        out = np.broadcast_to(out, (X.shape[0],))
        if np.iscomplexobj(out):
            out = np.where(np.abs(out.imag) <= 1e-9 * (1 + np.abs(out.real)), out.real, np.nan)
    return out.astype(float)


def nmse(y_pred: np.ndarray, y: np.ndarray) -> float:
    """Official NMSE: mean squared error over the non-NaN predictions divided by var(y) on those points."""
    keep = ~np.isnan(y_pred)
    if not keep.any():
        return float("inf")
    with np.errstate(all="ignore"):
        value = np.mean((y[keep] - y_pred[keep]) ** 2) / np.var(y[keep])
    return float(value) if np.isfinite(value) else float("inf")


def acc_tau(y_pred: np.ndarray, y: np.ndarray, tau: float) -> float:
    """Acc_tau: 1 when every test point has relative error at most tau (a NaN prediction fails), else 0."""
    with np.errstate(all="ignore"):
        return float(np.all(np.abs(y_pred - y) <= tau * np.abs(y)))


def round_constants(expr: sympy.Expr, decimals: int) -> sympy.Expr:
    return expr.xreplace({f: sympy.Float(round(float(f), decimals)) for f in expr.atoms(sympy.Float)})


def is_symbolic_solution(found: sympy.Expr, truth: sympy.Expr, symbols: tuple[sympy.Symbol, ...],
                         X: np.ndarray, decimals: int) -> bool:
    """SRBench's symbolic solution: ``found`` is not constant and, with constants rounded, ``found - truth`` or
    ``found / truth`` (nonzero) is a constant. A numeric screen on the rows of ``X`` (n, d) rejects most
    candidates cheaply; ``sympy.simplify`` must confirm the rest (an equivalence sympy cannot prove counts as none)."""
    found, truth = round_constants(found, decimals), round_constants(truth, decimals)
    if not found.free_symbols:
        return False
    a, b = evaluate(found, symbols, X), evaluate(truth, symbols, X)
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return False
    scale = np.max(np.abs(b))
    same_up_to_shift = np.ptp(a - b) <= 1e-8 * scale
    with np.errstate(all="ignore"):
        ratio = a / b
    same_up_to_scale = bool(np.all(np.isfinite(ratio))) and np.ptp(ratio) <= 1e-8 * np.max(np.abs(ratio)) and ratio[0] != 0
    if same_up_to_shift and not sympy.simplify(found - truth).free_symbols:
        return True
    return bool(same_up_to_scale and not sympy.simplify(found / truth).free_symbols)


def score(problem: Problem, found: sympy.Expr, p: Params) -> dict[str, float]:
    """The official metrics of one discovered equation on the problem's ID, second-ID and OOD test sets."""
    out: dict[str, float] = {}
    for split, (X, y) in (("id", problem.test_id), ("id2", problem.test_id2), ("ood", problem.test_ood)):
        y_pred = evaluate(found, problem.symbols, X)
        out[f"nmse_{split}"] = nmse(y_pred, y)
        out[f"acc_tau_{split}"] = acc_tau(y_pred, y, p.tolerance)
    out["symbolic"] = float(is_symbolic_solution(found, problem.truth, problem.symbols, problem.test_id[0], p.round_decimals))
    return out


# ----------------------------------------------------------------------------------------------------------------
# LSR-Transform: rewriting a law for another variable by symbolic solving


Solutions = tuple[tuple[sympy.Symbol, tuple[sympy.Expr, ...]], ...]


def transform_solutions(law: Law) -> Solutions:
    """For every input ``x_k`` of ``law``: sympy's solutions of ``y = f(x)`` for ``x_k`` (none where sympy has no
    algorithm). The slow step of the construction (seconds per law), so the flow runs it once for all seeds."""
    y = _symbol(law.output)
    out = []
    for x in law_inputs(law):
        try:
            solutions = tuple(sympy.solve(sympy.Eq(y, law_expr(law)), x))
        except NotImplementedError:
            solutions = ()
        out.append((x, solutions))
    return tuple(out)


def _uniform(ranges: tuple[tuple[str, float, float], ...], n: int, rng: np.random.Generator,
             ood_stretch: float | None = None) -> np.ndarray:
    """(n, len(ranges)) samples: each column uniform on [lo, hi], or on (hi, hi + stretch (hi - lo)] for OOD."""
    lo = np.array([r[1] for r in ranges], dtype=float)
    hi = np.array([r[2] for r in ranges], dtype=float)
    if ood_stretch is not None:
        lo, hi = hi, hi + ood_stretch * (hi - lo)
    return rng.uniform(lo, hi, size=(n, len(ranges)))


def law_problems(law: Law, solutions: Solutions, p: Params, rng: np.random.Generator) -> tuple[Problem, Problem | None]:
    """The law as it is (``original``) and one rewrite of it chosen at random among the valid ones (``transform``;
    None when no input has exactly one solution that reproduces the data)."""
    inputs, rhs = law_inputs(law), law_expr(law)
    n_id = p.n_train + 2 * p.n_test
    X_id, X_ood = _uniform(law.ranges, n_id, rng), _uniform(law.ranges, p.n_test, rng, p.ood_stretch)
    y_id, y_ood = evaluate(rhs, inputs, X_id), evaluate(rhs, inputs, X_ood)

    def make(name: str, category: str, symbols, truth, Xi, yi, Xo, yo) -> Problem:
        a, b = p.n_train, p.n_train + p.n_test
        return Problem(name, category, "feynman", tuple(symbols), truth,
                       (Xi[:a], yi[:a]), (Xi[a:b], yi[a:b]), (Xi[b:], yi[b:]), (Xo, yo))

    original = make(f"{law.name}:{law.output}", "original", inputs, rhs, X_id, y_id, X_ood, y_ood)
    valid = []
    for k, (x, solutions) in enumerate(solutions):
        symbols = tuple(s for s in inputs if s != x) + (_symbol(law.output),)
        Z_id, Z_ood = np.column_stack([np.delete(X_id, k, 1), y_id]), np.column_stack([np.delete(X_ood, k, 1), y_ood])
        reproducing = [g for g in solutions
                       if np.allclose(evaluate(g, symbols, Z_id), X_id[:, k], rtol=1e-7, atol=0)
                       and np.allclose(evaluate(g, symbols, Z_ood), X_ood[:, k], rtol=1e-7, atol=0)]
        if len(reproducing) == 1:
            valid.append((x, symbols, reproducing[0], Z_id, X_id[:, k], Z_ood, X_ood[:, k]))
    if not valid:
        return original, None
    x, symbols, truth, Z_id, t_id, Z_ood, t_ood = valid[rng.integers(len(valid))]
    return original, make(f"{law.name}:{x.name}", "transform", symbols, truth, Z_id, t_id, Z_ood, t_ood)


# ----------------------------------------------------------------------------------------------------------------
# LSR-Synth: a known domain term plus synthetic terms drawn from a grammar


@dataclass(frozen=True)
class Domain:
    """One LSR-Synth domain. ``inputs`` are the target's arguments, ``states`` the ODE state (empty for a static
    law), ``known`` the domain term with its constants as ``{name}`` drawn from ``constants``, ``grammar`` the
    synthetic terms (some outside the skeleton search's term library, as real discoveries can be), ``initial`` the
    ranges of the initial states, ``horizon`` the simulated time. A static law (materials) has ``static_ranges``
    instead: (name, lo, hi, OOD stretch) per input; its OOD samples have the last input (T) beyond its range."""

    name: str
    inputs: tuple[str, ...]
    states: tuple[str, ...]
    known: str
    constants: tuple[tuple[str, float, float], ...]
    grammar: tuple[str, ...]
    initial: tuple[tuple[float, float], ...]
    horizon: float
    static_ranges: tuple[tuple[str, float, float, float], ...] = ()


DOMAINS: tuple[Domain, ...] = (
    Domain("chem_react", ("t", "A"), ("A",), "-{k}*A", (("k", 0.1, 1.0),),
           ("A**2", "sqrt(A)", "A*exp(-t)", "sin(t)", "A*cos(t)", "exp(-A)", "A**3", "A/(1 + A)"),
           ((0.5, 2.0),), 10.0),
    Domain("bio_pop_growth", ("t", "P"), ("P",), "{r}*P - {r_over_K}*P**2", (("r", 0.3, 1.0), ("r_over_K", 0.05, 0.3)),
           ("sqrt(P)", "P*sin(t)", "exp(-t)", "P*exp(-t)", "sin(P)", "cos(t)", "log(P)*P", "P/(1 + P)"),
           ((0.5, 3.0),), 10.0),
    Domain("phys_osc", ("t", "x", "v"), ("x", "v"), "-{w2}*x", (("w2", 0.5, 2.0),),
           ("v", "v**3", "x**3", "x*v", "sin(x)", "sin(t)", "x**2*v", "sin(x*v)"),
           ((-1.0, 1.0), (-1.0, 1.0)), 20.0),
    Domain("matsci", ("eps", "T"), (), "{E}*eps - {Ea}*eps*T", (("E", 1.0, 5.0), ("Ea", 0.1, 1.0)),
           ("eps**2", "eps**3", "sqrt(eps)*T", "eps*exp(-T)", "log(T)*eps", "sin(eps)", "eps*T**2", "eps/(1 + T)"),
           (), 0.0, (("eps", 0.05, 1.0, 1.0), ("T", 1.0, 2.0, 1.0))),
)

MAX_SYNTH_DRAWS = 50
N_TRAJECTORIES = 4
"""Initial states simulated per ODE problem (the ID/OOD pools are their samples before/after the split time)."""


def _draw_synth_expr(domain: Domain, rng: np.random.Generator) -> sympy.Expr:
    """Known term with drawn constants plus one or two grammar terms with signed coefficients, all on a 0.01 grid."""
    values = {name: round(float(rng.uniform(lo, hi)), 2) for name, lo, hi in domain.constants}
    terms = rng.choice(len(domain.grammar), size=int(rng.integers(1, 3)), replace=False)
    coefficients = np.round(rng.choice([-1.0, 1.0], size=terms.size) * rng.uniform(0.1, 1.0, size=terms.size), 2)
    text = domain.known.format(**values) + "".join(f" + ({c})*({domain.grammar[j]})" for c, j in zip(coefficients, terms))
    return sympy.expand(sympy.parse_expr(text, local_dict={s.name: s for s in _domain_symbols(domain)}))


def _synth_samples(domain: Domain, truth: sympy.Expr, symbols: tuple[sympy.Symbol, ...], p: Params,
                   rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """(X_id, y_id, X_ood, y_ood) of one draw, or None when the simulation leaves the physical range.

    ODEs: ``n_trajectories`` initial states simulated over the horizon; each sample is (t, state), its target
    the derivative; times past ``ood_time_fraction`` of the horizon are OOD. Static laws: uniform inputs, OOD
    when the last input (temperature) lies beyond its ID range."""
    n_id = p.n_train + 2 * p.n_test
    if not domain.states:
        ranges = tuple((name, lo, hi) for name, lo, hi, _ in domain.static_ranges)
        X_id = _uniform(ranges, n_id, rng)
        X_ood = _uniform(ranges, p.n_test, rng)
        name, lo, hi, stretch = domain.static_ranges[-1]
        X_ood[:, -1] = rng.uniform(hi, hi + stretch * (hi - lo), size=p.n_test)
        return X_id, evaluate(truth, symbols, X_id), X_ood, evaluate(truth, symbols, X_ood)
    rate = compiled(symbols, truth)
    times = np.linspace(0.0, domain.horizon, 200)
    rows = []
    for _ in range(N_TRAJECTORIES):
        start = [rng.uniform(lo, hi) for lo, hi in domain.initial]
        if len(domain.states) == 1:
            rhs = lambda t, s: [rate(t, s[0])]
        else:  # (x, v): dx/dt = v, dv/dt = target
            rhs = lambda t, s: [s[1], rate(t, s[0], s[1])]
        with np.errstate(all="ignore"):
            solution = solve_ivp(rhs, (0.0, domain.horizon), start, t_eval=times, rtol=1e-8, atol=1e-10)
        if not solution.success or solution.y.shape[1] != times.size:
            return None
        rows.append(np.column_stack([times, solution.y.T]))
    X = np.concatenate(rows)
    state = X[:, 1:]
    if not np.all(np.isfinite(state)) or np.abs(state).max() > 50 or (len(domain.states) == 1 and state.min() < 1e-3):
        return None
    y = evaluate(truth, symbols, X)
    late = X[:, 0] > p.ood_time_fraction * domain.horizon
    id_rows, ood_rows = rng.permutation(np.flatnonzero(~late)), rng.permutation(np.flatnonzero(late))
    if id_rows.size < n_id or ood_rows.size < p.n_test:
        raise ValueError(f"{domain.name}: {id_rows.size} ID and {ood_rows.size} OOD samples, fewer than "
                         f"n_train + 2 n_test = {n_id} and n_test = {p.n_test}")
    return X[id_rows[:n_id]], y[id_rows[:n_id]], X[ood_rows[:p.n_test]], y[ood_rows[:p.n_test]]


def synth_problem(domain: Domain, index: int, p: Params, rng: np.random.Generator) -> Problem:
    """Draw until the expression simulates within range, has spread in every split, and is solvable: its own
    skeleton, refitted on the training data, gives NMSE < 1e-6 (the plan's solvability check)."""
    for _ in range(MAX_SYNTH_DRAWS):
        truth = _draw_synth_expr(domain, rng)
        symbols = _domain_symbols(domain)
        samples = _synth_samples(domain, truth, symbols, p, rng)
        if samples is None:
            continue
        X_id, y_id, X_ood, y_ood = samples
        a, b = p.n_train, p.n_train + p.n_test
        if min(np.var(y_id[:a]), np.var(y_id[a:b]), np.var(y_id[b:]), np.var(y_ood)) < 1e-8 or not np.all(np.isfinite(y_ood)):
            continue
        problem = Problem(f"{domain.name}_{index}", "synth", domain.name, symbols, truth, (X_id[:a], y_id[:a]),
                          (X_id[a:b], y_id[a:b]), (X_id[b:], y_id[b:]), (X_ood, y_ood))
        if nmse(evaluate(discover_oracle(problem.task(), truth), symbols, X_id[:a]), y_id[:a]) < 1e-6:
            return problem
    raise RuntimeError(f"{domain.name}: no valid draw in {MAX_SYNTH_DRAWS} tries")


def _domain_symbols(domain: Domain) -> tuple[sympy.Symbol, ...]:
    """The inputs as sympy symbols: positive, except the oscillator's signed position and velocity."""
    return tuple(sympy.Symbol(name, real=True) if name in ("x", "v") else _symbol(name) for name in domain.inputs)


# ----------------------------------------------------------------------------------------------------------------
# Searchers: Task -> sympy.Expr over task.symbols


def _fit_linear(columns: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    """Least-squares coefficients of y (n,) on the columns (n, k) and the training NMSE of that fit."""
    coefficients = np.linalg.lstsq(columns, y, rcond=None)[0]
    return coefficients, nmse(columns @ coefficients, y)


def _linear_expr(coefficients: np.ndarray, terms: list[sympy.Expr]) -> sympy.Expr:
    return sympy.Add(*(sympy.Float(c) * t for c, t in zip(coefficients, terms)))


def discover_oracle(task: Task, truth: sympy.Expr) -> sympy.Expr:
    """The true skeleton with refitted parameters: the expanded truth's terms, each with a free coefficient."""
    terms = sorted((term.as_coeff_Mul()[1] for term in sympy.Add.make_args(sympy.expand(truth))),
                   key=sympy.default_sort_key)
    columns = np.column_stack([evaluate(t, task.symbols, task.X) for t in terms])
    return _linear_expr(_fit_linear(columns, task.y)[0], terms)


def discover_mean(task: Task) -> sympy.Expr:
    """The constant predictor: the training mean."""
    return sympy.Float(float(task.y.mean()))


def discover_memorized(task: Task) -> sympy.Expr:
    """Recall, not discovery: every original law of ``LAWS`` with every assignment of the task's inputs to its
    variables, scaled by a least-squares constant; the lowest training NMSE wins (ties: library order)."""
    best, best_nmse = discover_mean(task), nmse(np.full_like(task.y, task.y.mean()), task.y)
    d = len(task.symbols)
    for law in LAWS:
        variables, rhs = law_inputs(law), law_expr(law)
        if len(variables) > d:
            continue
        f = compiled(variables, rhs)
        assignments = list(itertools.permutations(range(d), len(variables)))
        with np.errstate(all="ignore"):
            F = np.stack([np.broadcast_to(f(*task.X[:, list(a)].T), task.y.shape) for a in assignments]).astype(float)
            scale = (F @ task.y) / np.einsum("an,an->a", F, F)
            errors = np.mean((task.y - scale[:, None] * F) ** 2, axis=1) / np.var(task.y)
        errors[~np.isfinite(errors)] = np.inf
        i = int(np.argmin(errors))
        if errors[i] < best_nmse:
            mapping = {v: task.symbols[j] for v, j in zip(variables, assignments[i])}
            best, best_nmse = sympy.Float(scale[i]) * rhs.xreplace(mapping), float(errors[i])
    return best


def _protected_exp(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return np.exp(np.clip(x, -50.0, 50.0))


GP_EXP = make_function(function=_protected_exp, name="exp", arity=1)
GP_FUNCTIONS = ("add", "sub", "mul", "div", "sqrt", "log", "sin", "cos", GP_EXP)
_GP_TO_SYMPY: dict[str, Callable] = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "div": lambda a, b: a / b,
    # gplearn's protected sqrt and log act on |x|; its protected division and exp differ only where |b| < 0.001
    # or |x| > 50, which the evaluated equation then shows as it is
    "sqrt": lambda a: sympy.sqrt(sympy.Abs(a)), "log": lambda a: sympy.log(sympy.Abs(a)),
    "sin": sympy.sin, "cos": sympy.cos, "exp": sympy.exp,
}


def gplearn_to_sympy(program: list, symbols: tuple[sympy.Symbol, ...]) -> sympy.Expr:
    """A gplearn program (``model._program.program``: prefix list of functions, feature indices and constants) as a
    sympy expression over ``symbols``, with the constants at full precision (its string shows 3 decimals)."""
    nodes = iter(program)

    def build() -> sympy.Expr:
        node = next(nodes)
        if isinstance(node, (int, np.integer)):
            return symbols[node]
        if isinstance(node, (float, np.floating)):
            return sympy.Float(float(node))
        return _GP_TO_SYMPY[node.name](*(build() for _ in range(node.arity)))

    return build()


def discover_gplearn(task: Task, p: Params, seed: int) -> sympy.Expr:
    """Genetic-programming symbolic regression with gplearn (the maintained library), converted to sympy."""
    model = SymbolicRegressor(population_size=p.gp_population, generations=p.gp_generations,
                              function_set=GP_FUNCTIONS, parsimony_coefficient=p.gp_parsimony,
                              random_state=seed, n_jobs=1)
    # gplearn sets and draws NumPy's global RandomState for its (here empty) out-of-bag split: isolate it
    with np.errstate(all="ignore"), global_rngs_isolated():
        model.fit(task.X, task.y)
    return gplearn_to_sympy(model._program.program, task.symbols)


# The skeleton search's term library: a term is a product of one or two factors f(x_j), or the constant 1.
FACTORS: dict[str, Callable[[sympy.Expr], sympy.Expr]] = {
    "x": lambda x: x, "x^2": lambda x: x**2, "x^3": lambda x: x**3, "sqrt": sympy.sqrt, "1/x": lambda x: 1 / x,
    "exp(-x)": lambda x: sympy.exp(-x), "log": sympy.log, "sin": sympy.sin, "cos": sympy.cos,
}
Term = tuple[tuple[str, int], ...]
"""Sorted (factor, input index) pairs; ``()`` is the constant term."""


def _random_term(rng: np.random.Generator, d: int) -> Term:
    names = list(FACTORS)
    draw = lambda: (names[rng.integers(len(names))], int(rng.integers(d)))
    roll = rng.random()
    if roll < 0.05:
        return ()
    return tuple(sorted({draw()} if roll < 0.55 else {draw(), draw()}))


def _mutate(skeleton: frozenset[Term], rng: np.random.Generator, d: int, max_terms: int) -> frozenset[Term]:
    """Add, drop or replace one term (the edit an LLM-SR prompt asks of the LLM, here drawn at random)."""
    terms = sorted(skeleton)  # not list(): a frozenset's order follows string hashing, which differs per process
    move = rng.integers(3)
    if move == 0 and len(terms) < max_terms:
        terms.append(_random_term(rng, d))
    elif move == 1 and len(terms) > 1:
        terms.pop(int(rng.integers(len(terms))))
    else:
        terms[int(rng.integers(len(terms)))] = _random_term(rng, d)
    return frozenset(terms)


def discover_skeleton_search(task: Task, p: Params, rng: np.random.Generator) -> sympy.Expr:
    """LLM-SR's loop without the LLM: propose a skeleton (fresh from the grammar with probability
    ``search_explore``, else a mutation of a buffer member picked with weight 1/rank), fit its parameters, keep the
    ``search_buffer`` best by score ln(NMSE + 1e-14) + penalty * terms; return the best fitted equation."""
    d = len(task.symbols)
    with np.errstate(all="ignore"):
        factor_values = {(name, j): evaluate(f(task.symbols[j]), task.symbols, task.X)
                         for name, f in FACTORS.items() for j in range(d)}

    def column(term: Term) -> np.ndarray:
        with np.errstate(all="ignore"):
            return np.prod([factor_values[f] for f in term], axis=0) if term else np.ones_like(task.y)

    scored: dict[frozenset[Term], tuple[float, np.ndarray]] = {}
    buffer: list[frozenset[Term]] = []
    for _ in range(p.search_iterations):
        if not buffer or rng.random() < p.search_explore:
            size = int(rng.integers(1, p.search_max_terms + 1))
            skeleton = frozenset(_random_term(rng, d) for _ in range(size))
        else:
            weights = 1.0 / np.arange(1, len(buffer) + 1)
            parent = buffer[rng.choice(len(buffer), p=weights / weights.sum())]
            skeleton = _mutate(parent, rng, d, p.search_max_terms)
        if skeleton in scored:
            continue
        columns = np.column_stack([column(t) for t in sorted(skeleton)])
        if not np.all(np.isfinite(columns)):
            scored[skeleton] = (np.inf, np.zeros(len(skeleton)))
            continue
        coefficients, error = _fit_linear(columns, task.y)
        scored[skeleton] = (np.log(error + 1e-14) + p.search_term_penalty * len(skeleton), coefficients)
        buffer = sorted({*buffer, skeleton}, key=lambda s: (scored[s][0], sorted(s)))[:p.search_buffer]
    if not buffer:
        return discover_mean(task)
    best = buffer[0]
    terms = [sympy.Mul(*(FACTORS[name](task.symbols[j]) for name, j in term)) for term in sorted(best)]
    return _linear_expr(scored[best][1], terms)


# ----------------------------------------------------------------------------------------------------------------
# The benchmark and one problem's run


SEARCHERS = ("gplearn", "skeleton_search", "memorizer", "mean", "oracle_skeleton")
"""Run on: original laws (memorizer, mean), LSR-Transform (all but the oracle), LSR-Synth (all)."""


def build_benchmark(p: Params, seed: int, solutions: tuple[Solutions, ...]) -> list[Problem]:
    """One seed's benchmark: for each of the first ``n_laws`` laws its original form and one valid rewrite, and
    ``synth_per_domain`` LSR-Synth draws per domain. ``solutions[i]`` are law i's sympy solutions."""
    rng = numpy_rng(seed, 0)
    problems: list[Problem] = []
    for law, law_solutions in zip(LAWS[:p.n_laws], solutions):
        original, transformed = law_problems(law, law_solutions, p, rng)
        problems += [original] + ([transformed] if transformed is not None else [])
    for domain in DOMAINS:
        problems += [synth_problem(domain, i, p, rng) for i in range(p.synth_per_domain)]
    return problems


def run_problem(p: Params, seed: int, index: int, problem: Problem) -> list[dict]:
    """Every searcher that applies to ``problem`` (seed ``seed``, position ``index`` in the benchmark), scored."""
    task = problem.task()
    searchers: dict[str, Callable[[], sympy.Expr]] = {
        "memorizer": lambda: discover_memorized(task), "mean": lambda: discover_mean(task)}
    if problem.category != "original":
        searchers["gplearn"] = lambda: discover_gplearn(task, p, int(numpy_rng(seed, 1, index).integers(2**31)))
        searchers["skeleton_search"] = lambda: discover_skeleton_search(task, p, numpy_rng(seed, 2, index))
    if problem.category == "synth":
        searchers["oracle_skeleton"] = lambda: discover_oracle(task, problem.truth)
    rows = []
    for name in SEARCHERS:
        if name in searchers:
            found = searchers[name]()
            rows.append({"seed": seed, "problem": problem.name, "category": problem.category, "domain": problem.domain,
                         "method": name, "truth": str(problem.truth), "found": str(found), **score(problem, found, p)})
    return rows
