"""Wait-less online linear programming (Sun, Gao, Vitercik, Ye; ICML 2025), plain NumPy + SciPy.

Online linear programming (OLP), stochastic-input model. Customers t = 1..T arrive one at a time
with a reward r_t and a resource request a_t in R^m; (r_t, a_t) are i.i.d. The decision maker
accepts (x_t = 1) or rejects (x_t = 0) irrevocably, and may never use more than the budget
b = T * d in total. Every policy here prices resources with a dual vector p >= 0 and accepts
when the reward beats the priced request, r_t > a_t . p, and the request still fits.

The offline benchmark is the hindsight LP relaxation on the whole sample,
    max r^T x   s.t.  A^T x <= b,  0 <= x <= 1,
which upper-bounds the reward of every online policy; regret = LP optimum - online reward.

Three online policies (all in :func:`run_policy`, which takes the re-solve schedule and the
first-order step as arguments):

* LP-based (re-solve every step): after t customers, the price is the dual of the LP on the
  history with the remaining-budget rate d_t = remaining / (T - t),
      p = argmin_{p >= 0}  d_t . p + (1/t) sum_{s <= t} (r_s - a_s . p)^+ ,
  i.e. the dual of  max sum_s r_s x_s  s.t.  sum_s a_s x_s <= t d_t,  0 <= x <= 1.
* First-order (projected dual subgradient): p <- max(0, p + eta (a_t x_t - d)), d = b / T,
  eta = 1 / sqrt(T), p starts at 0.
* Wait-less (the paper): re-solve the LP above only every f customers (f = ceil(sqrt(T)));
  decisions never wait: the price an LP produces is used from the next customer on (``lag`` = 0,
  as in the official code) or ``lag`` intervals later. First-order steps smooth the price where
  ``fo_mode`` says:
  ``"ends"`` (default; the official code's Algorithm 1): only in the first batch, before any LP
  price exists (step 2/(t+1)^(2/3)), and in the last f customers (step 1/f^(2/3)), with d = b/T;
  the latest LP price is held in between.
  ``"between"``: after every customer, from the latest LP price (the abstract's "a first-order
  method runs during each interval between LP re-solves"; the plan reads it with eta = 1/sqrt(f)
  and the remaining-budget rate; the official code's Algorithm 2 uses f = ceil(T^(1/3)) and
  steps ~t^(-2/3)).

Official code: github.com/Jingruo/Wait-Less-Online-Decision-Making (MATLAB + Gurobi). Unlike it,
a request is accepted here only if it still fits, so no policy ever overdraws a resource.

Shapes: T customers, m resources. ``Instance.r`` (T,), ``Instance.A`` (T, m) with row t = a_t,
``Instance.b`` (m,). Randomness only through ``np.random.default_rng(seed)``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pandas as pd
from scipy.optimize import linprog

from flows.waitless_olp.params import EtaSchedule, FOMode, InstanceKind, Params, Rate


# --------------------------------------------------------------------------------------------
# Instances
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Instance:
    """One OLP sample: rewards r (T,), requests A (T, m) (row t = a_t), budget b = T d (m,)."""

    r: np.ndarray
    A: np.ndarray
    b: np.ndarray

    @property
    def T(self) -> int:
        return int(self.A.shape[0])

    @property
    def m(self) -> int:
        return int(self.A.shape[1])


def make_instance(T: int, m: int, seed: int, kind: InstanceKind = "uniform",
                  a_high: float = 2.0, r_high: float = 2.0) -> Instance:
    """Stochastic-input instance, after the official code's data types 1 and 2.

    ``uniform``: a_t ~ U[0, a_high]^m, r_t ~ U[0, r_high], d_i ~ U[1/3, 2/3].
    ``correlated``: a_t ~ N(1, 1)^m (entries may be negative), r_t = sum_i a_ti - U[0, m],
    d_i ~ U[1/3, 2/3]. Budget b = T d.
    """
    rng = np.random.default_rng(seed)
    d = rng.uniform(1.0 / 3.0, 2.0 / 3.0, size=m)
    if kind == "uniform":
        A = rng.uniform(0.0, a_high, size=(T, m))
        r = rng.uniform(0.0, r_high, size=T)
    elif kind == "correlated":
        A = rng.normal(1.0, 1.0, size=(T, m))
        r = A.sum(axis=1) - rng.uniform(0.0, m, size=T)
    else:
        raise ValueError(f"unknown instance kind {kind!r}")
    return Instance(r=r, A=A, b=T * d)


# --------------------------------------------------------------------------------------------
# LP solves (HiGHS through scipy)
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LPSolution:
    value: float        # optimal objective of max r^T x
    x: np.ndarray       # (n,) primal solution in [0, 1]
    p: np.ndarray       # (m,) dual prices of the resource rows, >= 0


def solve_lp(r: np.ndarray, A: np.ndarray, rhs: np.ndarray) -> LPSolution:
    """max r^T x  s.t.  A^T x <= rhs, 0 <= x <= 1  with HiGHS; r (n,), A (n, m), rhs (m,).

    HiGHS presolve is off (about 25% faster on these small-m LPs, same optimum). ``linprog``
    minimises -r^T x; its ``ineqlin.marginals`` are d(min)/d(rhs) <= 0, so the dual
    prices of the maximisation are their negation.
    """
    res = linprog(-r, A_ub=A.T, b_ub=rhs, bounds=(0.0, 1.0), method="highs",
                  options={"presolve": False})
    if res.status != 0:
        raise RuntimeError(f"HiGHS failed: {res.message}")
    p = np.maximum(-np.asarray(res.ineqlin.marginals, dtype=float), 0.0)
    return LPSolution(value=float(-res.fun), x=np.asarray(res.x, dtype=float), p=p)


def offline_optimum(inst: Instance) -> LPSolution:
    """Hindsight LP relaxation on the whole sample: the upper bound every regret is taken from."""
    return solve_lp(inst.r, inst.A, inst.b)


def lp_price(r_seen: np.ndarray, A_seen: np.ndarray, remaining: np.ndarray, periods_left: int) -> np.ndarray:
    """Dual price of the re-solved LP on the t customers seen so far (shape (m,)).

    The right-hand side is t times the remaining-budget rate remaining / periods_left: the
    minimiser of d_t . p + (1/t) sum_s (r_s - a_s . p)^+ over p >= 0 (the plan's dual LP).
    """
    t = r_seen.shape[0]
    rhs = np.maximum(remaining, 0.0) * (t / periods_left)
    return solve_lp(r_seen, A_seen, rhs).p


def dual_objective(p: np.ndarray, r: np.ndarray, A: np.ndarray, d: np.ndarray) -> float:
    """g(p) = d . p + mean_s (r_s - a_s . p)^+ ; the LP dual divided by the sample size."""
    return float(d @ p + np.maximum(r - A @ p, 0.0).mean())


# --------------------------------------------------------------------------------------------
# Online policies
# --------------------------------------------------------------------------------------------
def first_order_step(p: np.ndarray, a: np.ndarray, x: float, d: np.ndarray, eta: float) -> np.ndarray:
    """Projected dual subgradient step p <- max(0, p + eta (a x - d)); all vectors (m,)."""
    return np.maximum(p + eta * (a * x - d), 0.0)


StepSize = Callable[[int], float]   # customers seen so far (1..T) -> first-order step size


@dataclass
class PolicyRun:
    x: np.ndarray       # (T,) accept decisions in {0, 1}
    reward: float       # r . x
    n_lp: int           # LP solves made
    lp_seconds: float   # wall time spent inside the LP solves
    seconds: float      # wall time of the whole online run (decisions + first-order + LPs)


def run_policy(inst: Instance, *, resolve_every: int | None, step_size: StepSize | None,
               rate: Rate = "fixed", fo_mode: FOMode = "between", lag: int = 0, use_lp: bool = True) -> PolicyRun:
    """Run one dual-price policy over the T customers of ``inst``.

    resolve_every: re-solve the history LP after every ``resolve_every`` customers (None: never).
    step_size: first-order step size as a function of the customers seen (None: no first-order).
    rate: the d of the first-order step, ``fixed`` b / T or the ``remaining`` budget rate.
    fo_mode: ``between`` (first-order after every customer) or ``ends`` (only while no LP price
        exists yet, i.e. the first ``resolve_every`` customers, and in the last ``resolve_every``
        customers; the latest LP price is held in between).
    lag: an LP price computed after customer t is used from customer t + lag * resolve_every + 1.
    use_lp: False is the ablation of the wait-less method (the flow's negative control): the same
        schedule of first-order steps with no LP ever solved, so between the first and the last f
        customers the price stays where the first batch's first-order steps left it.
    """
    start = time.perf_counter()
    r, A, b = inst.r, inst.A, inst.b
    T, m = A.shape
    d_fixed = b / T
    p = np.zeros(m)
    remaining = b.astype(float).copy()
    x = np.zeros(T)
    pending: list[tuple[int, np.ndarray]] = []   # (customers seen when it takes effect, price)
    n_lp, lp_seconds = 0, 0.0
    f = resolve_every
    for t in range(T):                           # t customers have been seen before this one
        while pending and pending[0][0] <= t:
            p = pending.pop(0)[1]
        a = A[t]
        if r[t] > a @ p and (a <= remaining).all():
            x[t] = 1.0
            remaining -= a
        seen, left = t + 1, T - t - 1
        if step_size is not None and (fo_mode == "between" or f is None or seen <= f or t >= T - f):
            d = remaining / left if (rate == "remaining" and left > 0) else d_fixed
            p = first_order_step(p, a, x[t], d, step_size(seen))
        if use_lp and f is not None and seen % f == 0 and left > 0:
            t0 = time.perf_counter()
            price = lp_price(r[:seen], A[:seen], remaining, left)
            lp_seconds += time.perf_counter() - t0
            n_lp += 1
            pending.append((seen + lag * f, price))
    return PolicyRun(x=x, reward=float(r @ x), n_lp=n_lp, lp_seconds=lp_seconds,
                     seconds=time.perf_counter() - start)


def resolve_frequency(T: int, exponent: float) -> int:
    """f = ceil(T^exponent) (the official code uses ceil(sqrt(T))); rounded first so 8000^(2/3) is 400."""
    return max(1, math.ceil(round(T ** exponent, 6)))


def first_order(inst: Instance, eta_scale: float = 1.0) -> PolicyRun:
    """Projected dual subgradient, eta = eta_scale / sqrt(T), fixed d = b / T, p starts at 0."""
    eta = eta_scale / math.sqrt(inst.T)
    return run_policy(inst, resolve_every=None, step_size=lambda seen: eta, rate="fixed")


def lp_every_step(inst: Instance) -> PolicyRun:
    """LP-based: re-solve the history LP after every customer (T - 1 solves), no first-order step."""
    return run_policy(inst, resolve_every=1, step_size=None)


def waitless_step_size(f: int, schedule: EtaSchedule, eta_scale: float = 1.0) -> StepSize:
    """First-order step sizes of the wait-less algorithm.

    ``official``: 2 / (seen + 1)^(2/3) in the first batch (no LP price yet), 1 / f^(2/3) after it
    (the official code's Algorithm 1). ``sqrt_f``: eta_scale / sqrt(f) throughout (the plan).
    """
    if schedule == "official":
        late = 1.0 / f ** (2.0 / 3.0)
        return lambda seen: 2.0 / (seen + 1) ** (2.0 / 3.0) if seen <= f else late
    eta = eta_scale / math.sqrt(f)
    return lambda seen: eta


def waitless(inst: Instance, f: int, *, fo_mode: FOMode = "ends", schedule: EtaSchedule = "official",
             rate: Rate = "fixed", lag: int = 0, eta_scale: float = 1.0, use_lp: bool = True) -> PolicyRun:
    """The paper's algorithm: LP re-solve every f customers, first-order steps where ``fo_mode`` says.

    Defaults are the official code's Algorithm 1 (first-order only in the first batch and the last
    f customers, fixed d, LP price used from the next customer on). ``use_lp=False``: the ablation
    without LP re-solves (see :func:`run_policy`).
    """
    return run_policy(inst, resolve_every=f, step_size=waitless_step_size(f, schedule, eta_scale),
                      rate=rate, fo_mode=fo_mode, lag=lag, use_lp=use_lp)


def budget_ok(inst: Instance, x: np.ndarray, tol: float = 1e-9) -> bool:
    """True when no prefix of the accepted requests exceeds the budget (x (T,))."""
    used = np.cumsum(inst.A * x[:, None], axis=0)
    return bool((used <= inst.b + tol).all())


# --------------------------------------------------------------------------------------------
# Per-seed experiments (plain dicts of JSON-able values)
# --------------------------------------------------------------------------------------------
def instance_seed(seed: int, T: int) -> int:
    """Independent instance per (seed, T), the same for every policy that runs on it."""
    return int(np.random.SeedSequence([seed, T]).generate_state(1)[0])


def instance_for(p: Params, seed: int, T: int) -> Instance:
    """The instance of (seed, T) under the run's params (reads p.m, p.instance, p.a_high, p.r_high)."""
    return make_instance(T, p.m, instance_seed(seed, T), p.instance, p.a_high, p.r_high)


def instance_table(inst: Instance) -> dict[str, np.ndarray]:
    """Columns of one instance for storage: t, r, a_0..a_{m-1} (length T each)."""
    return {"t": np.arange(inst.T), "r": inst.r, **{f"a_{i}": inst.A[:, i] for i in range(inst.m)}}


def instance_tables(p: Params, seeds: list[int]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every (seed, T in p.horizons) instance the policies run on: the requests (columns seed, T, t, r,
    a_0..) and the budgets (columns seed, T, b_0..), for storage."""
    instances, budgets = [], []
    for seed in seeds:
        for T in p.horizons:
            inst = instance_for(p, seed, T)
            instances.append(pd.DataFrame({"seed": seed, "T": T, **instance_table(inst)}))
            budgets.append({"seed": seed, "T": T, **{f"b_{i}": b for i, b in enumerate(inst.b)}})
    return pd.concat(instances, ignore_index=True), pd.DataFrame(budgets)


def proposed_settings(p: Params) -> dict[str, Any]:
    """Keyword arguments of :func:`waitless` for the run's wait-less policy (p.fo_mode, p.eta_schedule,
    p.fo_rate, p.lag, p.eta_scale)."""
    return {"fo_mode": p.fo_mode, "schedule": p.eta_schedule, "rate": p.fo_rate, "lag": p.lag,
            "eta_scale": p.eta_scale}


def plan_variant_settings(p: Params) -> dict[str, Any]:
    """The plan's literal reading: first-order after every customer, eta = 1/sqrt(f), remaining rate
    (p.lag and p.eta_scale as in the run)."""
    return {"fo_mode": "between", "schedule": "sqrt_f", "rate": "remaining", "lag": p.lag,
            "eta_scale": p.eta_scale}


def run_seed(p: Params, seed: int) -> dict:
    """Regret of first-order and wait-less (every f exponent) at every horizon, on one instance each.

    Reads the instance params, p.horizons, p.f_exponents (the first one is the headline f) and the
    policy settings of :func:`proposed_settings`. Also runs, at the headline f, the plan's literal variant
    (:func:`plan_variant_settings`) and the ablation without LP re-solves (``waitless_nolp_<f>``, the
    flow's negative control: what the method's regret is without the LPs it is about). Returns {"seed", "rows"} with one row per
    (T, policy): T, policy, f, regret, reward, lp_opt, n_lp, seconds.
    """
    rows = []
    for T in p.horizons:
        inst = instance_for(p, seed, T)
        opt = offline_optimum(inst).value
        runs: list[tuple[str, int | None, PolicyRun]] = [("first_order", None, first_order(inst, p.eta_scale))]
        for k, e in enumerate(p.f_exponents):
            f = resolve_frequency(T, e)
            runs.append((f"waitless_{exponent_tag(e)}", f, waitless(inst, f, **proposed_settings(p))))
            if k == 0:
                runs.append((f"waitless_between_{exponent_tag(e)}", f, waitless(inst, f, **plan_variant_settings(p))))
                runs.append((f"waitless_nolp_{exponent_tag(e)}", f,
                             waitless(inst, f, **proposed_settings(p), use_lp=False)))
        for name, f, run in runs:
            rows.append({"T": T, "policy": name, "f": f, "regret": opt - run.reward, "reward": run.reward,
                         "lp_opt": opt, "n_lp": run.n_lp, "seconds": run.seconds})
    return {"seed": seed, "rows": rows}


def run_timing(p: Params, seed: int) -> dict:
    """LP-every-step versus wait-less (headline f) and first-order on one instance at ``p.timing_T``.

    The three run one after the other inside this call, so their wall times are comparable.
    """
    T = p.timing_T
    inst = instance_for(p, seed, T)
    opt = offline_optimum(inst).value
    f = resolve_frequency(T, p.f_exponents[0])
    runs = {"lp_every_step": lp_every_step(inst),
            "waitless": waitless(inst, f, **proposed_settings(p)),
            "first_order": first_order(inst, p.eta_scale)}
    return {"seed": seed, "T": T, "f": f,
            **{name: {"regret": opt - run.reward, "seconds": run.seconds, "lp_seconds": run.lp_seconds,
                      "n_lp": run.n_lp} for name, run in runs.items()}}


def run_timings(p: Params, seeds: list[int]) -> list[dict]:
    """:func:`run_timing` for each seed, one instance after the other: run as one task, never beside
    another, so that the wall times compare."""
    return [run_timing(p, seed) for seed in seeds]


def exponent_tag(exponent: float) -> str:
    """Policy-name suffix for f = T^exponent: 0.5 -> 'sqrtT', 2/3 -> 'T0p67'."""
    return "sqrtT" if abs(exponent - 0.5) < 1e-9 else f"T{exponent:.2f}".replace(".", "p")
