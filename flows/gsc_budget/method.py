"""Generative Social Choice with budgets (Boehmer, Fish, Procaccia, ICML 2025): the paper's synthetic model,
DemocraticProcess with (approximately accurate) queries, the approximate cost-based-BJR checker and three
baselines. No Prefect; read top to bottom.

The model (after the official ``synthetic_experiments/main.py``): ``n`` agents hold an opinion in
``1..o`` on each of ``m`` issues; a statement fixes an opinion on a non-empty subset of issues and costs
the number of issues it fixes; agent ``i``'s utility for statement ``a`` is
``sum over the issues a fixes of floor(o/2) - |opinion_i - a|``. A slate of total cost at most ``B`` is
built with two queries, which is all an LLM would be asked to answer (``QueryOracle``):

* ``Disc(i, a)``: agent i's utility for a, beta-accurate (``|Disc - u| <= beta``);
* ``Gen(S, l, x)``: a statement of cost <= x with many supporters at level l among the agents S,
  (gamma, delta, mu)-accurate: its support at level ``l - delta`` is at least ``gamma`` times the best
  support at level ``l`` among statements of cost <= ``ceil(mu x)``.

Here both are answered by brute force over all ``(o+1)^m - 1`` statements (``SyntheticOracle``), with the
errors injected as the official code does; a text/LLM-backed oracle only needs the same two methods.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from sklearn.cluster import KMeans

from flows.gsc_budget.params import ErrorCell, Params
from paperflows.core.seeding import numpy_rng

EXACT = ErrorCell(beta=0, delta=0, mu=1.0, gamma=1.0)
METHODS = ("democratic", "greedy", "cluster", "random")
AGENT_TYPE_ID = {"uniform": 0, "gauss": 1}
MODE_ID = {"random": 0, "worst": 1}


# ----------------------------------------------------------------------------------------------- the model
def enumerate_statements(m: int, o: int) -> np.ndarray:
    """All statements, shape ((o+1)^m - 1, m): entry j is the option fixed on issue j, 0 = issue not
    addressed. Ordered by cost, then issue subset, then options (the official enumeration order)."""
    rows = []
    for cost in range(1, m + 1):
        for subset in itertools.combinations(range(m), cost):
            for opts in itertools.product(range(1, o + 1), repeat=cost):
                row = np.zeros(m, dtype=np.int64)
                row[list(subset)] = opts
                rows.append(row)
    return np.array(rows, dtype=np.int64)


def utility_matrix(opinions: np.ndarray, statements: np.ndarray, o: int) -> np.ndarray:
    """u[i, a] = sum_{j fixed by a} floor(o/2) - |opinions[i, j] - a_j|; opinions (n, m), statements (S, m)
    -> (n, S) int. Issues a statement leaves open contribute nothing."""
    per_issue = o // 2 - np.abs(opinions[:, None, :] - statements[None, :, :])   # (n, S, m)
    return np.where(statements[None, :, :] > 0, per_issue, 0).sum(axis=2)


def sample_opinions(rng: np.random.Generator, kind: str, n: int, m: int, o: int) -> np.ndarray:
    """(n, m) opinions in 1..o: uniform, or the official 'Gauss' agents (a discretised normal with mean
    option 1 and std o/4, so most agents lean to one end of every issue)."""
    if kind == "uniform":
        return rng.integers(1, o + 1, size=(n, m))
    options = np.arange(1, o + 1)
    weights = np.exp(-0.5 * ((options - 1) / (o / 4)) ** 2)
    return rng.choice(options, size=(n, m), p=weights / weights.sum())


@dataclass(frozen=True)
class Instance:
    opinions: np.ndarray    # (n, m)
    statements: np.ndarray  # (S, m)
    cost: np.ndarray        # (S,) issues fixed
    utility: np.ndarray     # (n, S)
    options: int

    @property
    def n(self) -> int:
        return self.opinions.shape[0]

    @property
    def max_level(self) -> int:
        """r = m floor(o/2): the highest utility any statement can give."""
        return self.opinions.shape[1] * (self.options // 2)

    @property
    def min_level(self) -> int:
        """The lowest utility: m (floor(o/2) - (o - 1))."""
        return self.opinions.shape[1] * (self.options // 2 - (self.options - 1))


def make_instance(opinions: np.ndarray, o: int) -> Instance:
    statements = enumerate_statements(opinions.shape[1], o)
    return Instance(opinions, statements, (statements > 0).sum(axis=1), utility_matrix(opinions, statements, o), o)


def ceil_div(a: np.ndarray | int, b: int) -> np.ndarray | int:
    """ceil(a / b) for non-negative integers, without float rounding."""
    return -(-a // b)


def group_size_needed(cost: np.ndarray | int, n: int, B: int) -> np.ndarray | int:
    """ceil(c(a) n / B): the number of agents a statement of cost c(a) must represent."""
    return ceil_div(np.asarray(cost) * n, B)


# ------------------------------------------------------------------------------------------------ queries
class QueryOracle(Protocol):
    """What DemocraticProcess asks; a synthetic brute force here, an LLM in the paper (PROSE, GPT-4o).
    Statements are integer ids; ``cost(a)`` is their length (for text, e.g. a word count)."""

    def cost(self, statement: int) -> int: ...

    def discriminate(self, agents: np.ndarray, statement: int) -> np.ndarray:
        """Disc: approximate utilities of ``agents`` (k,) for ``statement`` -> (k,) ints."""

    def generate(self, remaining: np.ndarray, level: int, max_cost: int) -> int | None:
        """Gen: a statement of cost <= ``max_cost`` supported at ``level`` by many of the agents where
        ``remaining`` (n,) bool is True; None if it finds none."""


def _ceil_product(factor: float, value: int) -> int:
    # the official code takes math.ceil(factor * value); the rounding keeps 0.8 * 15 at 12, not 13
    return math.ceil(round(factor * value, 9))


@dataclass
class SyntheticOracle:
    """Brute-force Disc and Gen over every statement, with the paper's injected errors.

    Disc adds a fixed error per (agent, statement) (the official code caches it): an integer uniform in
    [-beta, beta] (``mode="random"``) or +-beta with equal odds (``mode="worst"``). Gen finds the best
    support s* at level l among statements of cost <= ceil(mu x) and returns a uniformly random statement
    of cost <= x whose support at level l - delta is >= ceil(gamma s*); with ``mode="worst"`` one of those
    with the least support. Supports are recomputed only when the remaining set or level changes.
    """

    instance: Instance
    cell: ErrorCell
    mode: str
    rng: np.random.Generator
    noise: np.ndarray = field(init=False)
    _cache_key: tuple = field(init=False, default=())
    _supports: tuple[np.ndarray, np.ndarray] = field(init=False)

    def __post_init__(self) -> None:
        shape, beta = self.instance.utility.shape, self.cell.beta
        if self.mode == "worst":
            self.noise = beta * self.rng.choice(np.array([-1, 1]), size=shape)
        else:
            self.noise = self.rng.integers(-beta, beta + 1, size=shape)

    def cost(self, statement: int) -> int:
        return int(self.instance.cost[statement])

    def discriminate(self, agents: np.ndarray, statement: int) -> np.ndarray:
        return self.instance.utility[agents, statement] + self.noise[agents, statement]

    def _support(self, remaining: np.ndarray, level: int) -> tuple[np.ndarray, np.ndarray]:
        key = (level, remaining.tobytes())
        if key != self._cache_key:
            u = self.instance.utility[remaining]                                     # (k, S)
            self._supports = ((u >= level).sum(axis=0), (u >= level - self.cell.delta).sum(axis=0))
            self._cache_key = key
        return self._supports

    def generate(self, remaining: np.ndarray, level: int, max_cost: int) -> int | None:
        support, support_relaxed = self._support(remaining, level)
        cost = self.instance.cost
        compare = cost <= _ceil_product(self.cell.mu, max_cost)
        best = int(support[compare].max()) if compare.any() else 0
        qualifying = np.flatnonzero((cost <= max_cost) & (support_relaxed >= _ceil_product(self.cell.gamma, best)))
        if qualifying.size == 0:
            return None
        if self.mode == "worst":
            least = support_relaxed[qualifying].min()
            qualifying = qualifying[support_relaxed[qualifying] == least]
        return int(self.rng.choice(qualifying))


# ------------------------------------------------------------------------------------ DemocraticProcess
@dataclass(frozen=True)
class Slate:
    statements: list[int]   # statement ids in the order added
    assigned: np.ndarray    # (n,) index into statements of the group each agent was removed with, -1 = none


def democratic_process(oracle: QueryOracle, n: int, m: int, B: int, max_level: int) -> Slate:
    """DemocraticProcess (the official ``base_slate_generation``, version 0).

    For l = r, r-1, ..., 0 and for a length counter j = m n / B down to 1 (cost bound x = floor(j B / n)):
    ask Gen(S, l, x) for a statement a; S' = agents of S with Disc >= l; if |S'| >= ceil(c(a) n / B),
    put a on the slate and remove the ceil(c(a) n / B) agents of S' with the highest Disc from S (they
    are a's group), then ask again at the same j; otherwise decrease j. Each added statement removes at
    least c(a) n / B agents, so the slate's total cost never exceeds B.
    """
    remaining = np.ones(n, dtype=bool)
    assigned = np.full(n, -1)
    slate: list[int] = []
    level = max_level
    while level >= 0 and remaining.any():
        j = m * n / B
        while j >= 1 and remaining.any():
            x = int(j * B / n)
            # the official guard (it only bites when a statement longer than B is asked for)
            if x - sum(oracle.cost(a) for a in slate) > B:
                j -= 1
                continue
            a = oracle.generate(remaining, level, x)
            if a is None:
                j -= 1
                continue
            agents = np.flatnonzero(remaining)
            disc = oracle.discriminate(agents, a)
            need = int(group_size_needed(oracle.cost(a), n, B))
            supporters = disc >= level
            if supporters.sum() < need:
                j -= 1
                continue
            # the need supporters with the highest Disc; a stable sort keeps agent order among ties, as
            # the official sorted(..., reverse=True) does
            order = np.argsort(-disc[supporters], kind="stable")[:need]
            group = agents[supporters][order]
            assigned[group] = len(slate)
            remaining[group] = False
            slate.append(a)
        level -= 1
    return Slate(slate, assigned)


def assigned_utility(instance: Instance, slate: Slate) -> np.ndarray:
    """(n,) true utility of each agent for the statement it was assigned to; 0 if unassigned (the
    official convention: an unrepresented agent gets the empty statement)."""
    ids = np.array(slate.statements + [0], dtype=np.int64)[slate.assigned]
    return np.where(slate.assigned >= 0, instance.utility[np.arange(instance.n), ids], 0)


def best_utility(instance: Instance, statements: list[int]) -> np.ndarray:
    """(n,) each agent's best utility over the slate, floored at 0 (the empty statement): the most generous
    reading of a slate without an assignment, used for the baselines and for the utility comparison."""
    if not statements:
        return np.zeros(instance.n, dtype=np.int64)
    return np.maximum(instance.utility[:, statements].max(axis=1), 0)


# ------------------------------------------------------------------------------------------ the axiom
def deviation_ratios(instance: Instance, satisfaction: np.ndarray, B: int) -> np.ndarray:
    """The approximate-cBJR 'heatmap' row: d[c] for c = 0..r (shape (r+1,)).

    d[c] = max over statements a and levels l of |{i : u_i(a) >= l and sat_i < l - c}| / ceil(c(a) n / B):
    the largest group, relative to the size a statement of a's cost must represent, that would all gain
    more than c by getting a. A (c, d)-deviation exists iff d[c] >= d; exact cBJR is d[0] < 1.
    Vectorised: a histogram over (statement, utility, satisfaction) and two cumulative sums.
    """
    u, n = instance.utility, instance.n
    lo = min(instance.min_level, int(satisfaction.min()))
    hi = max(instance.max_level, int(satisfaction.max()))
    K = hi - lo + 1
    S = u.shape[1]
    index = (np.arange(S)[None, :] * K + (u - lo)) * K + (satisfaction[:, None] - lo)
    hist = np.bincount(index.ravel(), minlength=S * K * K).reshape(S, K, K)   # [a, u - lo, sat - lo]
    at_least = hist[:, ::-1, :].cumsum(axis=1)[:, ::-1, :]                     # #{u >= level, sat = v}
    below = np.concatenate([np.zeros((S, K, 1), dtype=np.int64), at_least.cumsum(axis=2)], axis=2)  # sat < t
    levels = np.arange(instance.min_level, instance.max_level + 1)
    slacks = np.arange(0, instance.max_level + 1)
    t = np.clip(levels[:, None] - slacks[None, :] - lo, 0, K)                   # (L, C): sat < level - c
    groups = below[:, (levels - lo)[:, None], t]                                # (S, L, C)
    need = group_size_needed(instance.cost, n, B)
    return (groups / need[:, None, None]).max(axis=(0, 1))


def violates_bound(ratios: np.ndarray, cell: ErrorCell) -> bool:
    """True iff some (c, d)-deviation has c > 2 beta + delta and d > 1 / (mu gamma), the paper's guarantee."""
    slack = 2 * cell.beta + cell.delta
    return bool(np.any(ratios[slack + 1:] > 1.0 / (cell.mu * cell.gamma) + 1e-9))


def tenth_percentile_mean(values: np.ndarray) -> float:
    """Mean of the values at or below the 10th percentile (the official metric)."""
    return float(values[values <= np.percentile(values, 10)].mean())


# ------------------------------------------------------------------------------------------- baselines
def greedy_utilitarian(instance: Instance, B: int) -> list[int]:
    """Add the affordable statement with the largest gain in total (best-of-slate, floored at 0) utility
    per unit cost until the budget is spent or nothing gains."""
    u, cost = instance.utility, instance.cost
    sat = np.zeros(instance.n, dtype=np.int64)
    slate: list[int] = []
    spent = 0
    while True:
        gain = np.maximum(u - sat[:, None], 0).sum(axis=0) / cost
        gain[cost > B - spent] = -np.inf
        a = int(np.argmax(gain))
        if not gain[a] > 0:
            return slate
        slate.append(a)
        spent += int(cost[a])
        sat = np.maximum(sat, u[:, a])


def cluster_then_summarize(instance: Instance, B: int, share: int, seed: int) -> list[int]:
    """k-means (k = B // share) on the agents' opinion vectors, then per cluster the statement of cost
    <= share (and within the remaining budget) with the largest total utility for the cluster: the
    analogue of the paper's clustering baseline."""
    k = max(1, min(B // share, len(np.unique(instance.opinions, axis=0))))
    labels = KMeans(n_clusters=k, n_init=4, random_state=seed).fit_predict(instance.opinions.astype(float))
    slate: list[int] = []
    spent = 0
    for c in range(k):
        allowed = instance.cost <= min(share, B - spent)
        if not allowed.any():
            break
        total = np.where(allowed, instance.utility[labels == c].sum(axis=0), np.iinfo(np.int64).min)
        a = int(np.argmax(total))
        if a not in slate:
            slate.append(a)
            spent += int(instance.cost[a])
    return slate


def random_slate(instance: Instance, B: int, rng: np.random.Generator) -> list[int]:
    """Uniformly random affordable statements until none fits the budget."""
    slate: list[int] = []
    spent = 0
    while True:
        affordable = np.flatnonzero(instance.cost <= B - spent)
        if affordable.size == 0:
            return slate
        a = int(rng.choice(affordable))
        slate.append(a)
        spent += int(instance.cost[a])


# ----------------------------------------------------------------------------------------------- a seed
def _row(inst: Instance, B: int, statements: list[int], satisfaction: np.ndarray,
         best: np.ndarray, cell: ErrorCell, **labels) -> dict:
    ratios = deviation_ratios(inst, satisfaction, B)
    cost = [int(inst.cost[a]) for a in statements]
    return {**labels, "slate_cost": sum(cost), "n_statements": len(statements),
            "mean_length": float(np.mean(cost)) if cost else 0.0,
            "cbjr": bool(ratios[0] < 1.0), "violates_bound": violates_bound(ratios, cell), "mean_util": float(satisfaction.mean()),
            "p10_util": tenth_percentile_mean(satisfaction.astype(float)),
            "mean_util_best": float(best.mean()), "p10_util_best": tenth_percentile_mean(best.astype(float)),
            **{f"d_c{c}": float(r) for c, r in enumerate(ratios)}}


def run_instance(p: Params, seed: int, agent_type: str, B: int, index: int) -> list[dict]:
    """One random instance: DemocraticProcess with exact queries and with every (error cell, mode), and
    the three baselines; one row per run with its deviation ratios d[c] and utilities."""
    m, o, n = p.issues, p.options, p.agents
    stream = (AGENT_TYPE_ID[agent_type], B, index)
    instance = make_instance(sample_opinions(numpy_rng(seed, 0, *stream), agent_type, n, m, o), o)
    base = {"seed": seed, "agent_type": agent_type, "budget": B, "instance": index}
    rows = []
    runs = [(EXACT, "random")] + [(cell, mode) for cell in p.error_cells for mode in p.error_modes]
    for k, (cell, mode) in enumerate(runs):
        oracle = SyntheticOracle(instance, cell, mode, numpy_rng(seed, 1, *stream, k))
        slate = democratic_process(oracle, n, m, B, instance.max_level)
        rows.append(_row(instance, B, slate.statements, assigned_utility(instance, slate),
                         best_utility(instance, slate.statements), cell, **base, method="democratic",
                         exact=k == 0, beta=cell.beta, delta=cell.delta, mu=cell.mu, gamma=cell.gamma, mode=mode))
    baselines = {"greedy": greedy_utilitarian(instance, B),
                 "cluster": cluster_then_summarize(instance, B, p.cluster_share, seed * 1000 + index),
                 "random": random_slate(instance, B, numpy_rng(seed, 2, *stream))}
    for name, statements in baselines.items():
        best = best_utility(instance, statements)
        rows.append(_row(instance, B, statements, best, best, EXACT, **base, method=name, exact=True,
                         beta=0, delta=0, mu=1.0, gamma=1.0, mode="none"))
    return rows


def run_seed(p: Params, seed: int) -> list[dict]:
    """All instances of one seed: ``instances_per_seed`` per (agent type, budget)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):   # seeds run in parallel threads; keep BLAS/OpenMP to one thread each
        return [row for agent_type in p.agent_types for B in p.budgets
                for index in range(p.instances_per_seed) for row in run_instance(p, seed, agent_type, B, index)]


def naive_deviation_ratios(instance: Instance, satisfaction: np.ndarray, B: int) -> np.ndarray:
    """The official triple loop (statements x slacks x levels), for checking ``deviation_ratios``."""
    n = instance.n
    out = np.zeros(instance.max_level + 1)
    for a in range(instance.utility.shape[1]):
        need = math.ceil(instance.cost[a] * n / B)
        for c in range(instance.max_level + 1):
            for level in range(instance.min_level, instance.max_level + 1):
                size = sum(1 for i in range(n) if instance.utility[i, a] >= level and satisfaction[i] < level - c)
                out[c] = max(out[c], size / need)
    return out
