"""llm_srbench: the official metrics on hand cases, the rewrite filter on a law with two branches, the ODE data against
the closed-form solution, gplearn's programs against gplearn's own predictions, the least-squares fit against BFGS,
and the searchers on problems with a known answer (smoke run, determinism and params come from test_papers.py)."""

import os
import subprocess
import sys

import numpy as np
import pytest
import sympy
from conftest import ROOT, params_for
from scipy.optimize import minimize

from flows.llm_srbench import method


def test_nmse_and_acc_tau_follow_the_official_definitions():
    y = np.array([1.0, 2.0, 3.0, 4.0])
    y_pred = np.array([1.1, 2.0, np.nan, 3.0])
    # official: NaN predictions are dropped, the variance is that of the kept targets
    assert method.nmse(y_pred, y) == pytest.approx((0.01 + 0 + 1) / 3 / np.var([1.0, 2.0, 4.0]))
    assert method.nmse(np.full(4, np.nan), y) == float("inf")
    assert method.acc_tau(np.array([1.05, 2.1, 2.8, 4.0]), y, 0.1) == 1.0
    assert method.acc_tau(np.array([1.05, 2.1, 2.6, 4.0]), y, 0.1) == 0.0  # 3 -> 2.6 is 13% off
    assert method.acc_tau(y_pred, y, 0.5) == 0.0  # a NaN prediction fails


def test_symbolic_solution_allows_a_constant_shift_or_scale_only():
    x, z = sympy.symbols("x z", positive=True)
    X = np.random.default_rng(0).uniform(1, 5, size=(50, 2))
    check = lambda found, truth: method.is_symbolic_solution(found, truth, (x, z), X, decimals=3)
    assert check(2.5 * x * z, x * z) and check(x / z + 7, x / z)
    assert check(sympy.Float(0.50000001) * x**2, x**2 / 2)  # rounding removes the fitting residue
    assert not check(x * z + x, x * z)
    assert not check(sympy.Float(0.333) * x + z, x / 3 + z)  # 0.333 != 1/3 once it is not an overall scale
    assert not check(sympy.Float(3.0), x * z)  # a constant is never a solution


def test_rewrite_keeps_only_a_target_with_one_solution_that_reproduces_the_data():
    p = params_for("llm_srbench", n_train=30, n_test=20)
    both_branches = method.Law("toy", "y", "(x - 2)**2", (("x", 1.0, 3.0),))  # x = 2 -+ sqrt(y): data on both sides
    one_branch = method.Law("toy", "y", "(x - 2)**2", (("x", 2.5, 4.0),))  # only x = 2 + sqrt(y)
    solutions = method.transform_solutions(both_branches)
    assert len(solutions[0][1]) == 2
    assert method.law_problems(both_branches, solutions, p, np.random.default_rng(0))[1] is None
    original, rewrite = method.law_problems(one_branch, solutions, p, np.random.default_rng(0))
    y = sympy.Symbol("y", positive=True)
    assert sympy.simplify(rewrite.truth - (2 + sympy.sqrt(y))) == 0 and rewrite.symbols == (y,)
    # the rewrite's inputs are the original outputs and its target the original input, sample for sample
    np.testing.assert_allclose(rewrite.train[0][:, 0], original.train[1])
    np.testing.assert_allclose(rewrite.train[1], original.train[0][:, 0])
    assert original.test_ood[0].min() > 4.0


def test_transform_of_a_feynman_law_solves_for_the_chosen_input():
    law = next(l for l in method.LAWS if l.name == "I.14.3")  # U = m g z
    p = params_for("llm_srbench", n_train=30, n_test=20)
    _, rewrite = method.law_problems(law, method.transform_solutions(law), p, np.random.default_rng(1))
    m, g, z, U = (sympy.Symbol(n, positive=True) for n in ("m", "g", "z", "U"))
    target = {"m": U / (g * z), "g": U / (m * z), "z": U / (m * g)}[rewrite.name.split(":")[1]]
    assert sympy.simplify(rewrite.truth - target) == 0
    X, y = rewrite.test_ood
    np.testing.assert_allclose(method.evaluate(target, rewrite.symbols, X), y, rtol=1e-10)


def test_ode_samples_follow_the_closed_form_solution_and_split_by_time():
    p = params_for("llm_srbench", n_train=60, n_test=30, ood_time_fraction=0.6)
    chem = method.DOMAINS[0]
    t, A = method._domain_symbols(chem)
    X_id, y_id, X_ood, y_ood = method._synth_samples(chem, -0.5 * A, (t, A), p, np.random.default_rng(0))
    for X, y in ((X_id, y_id), (X_ood, y_ood)):
        np.testing.assert_allclose(y, -0.5 * X[:, 1])  # the target is the derivative at the sampled state
        decay = np.exp(-0.5 * X[:, 0])  # A(t) = A0 exp(-t/2) with A0 in [0.5, 2]
        assert np.all(X[:, 1] >= 0.5 * decay * (1 - 1e-6)) and np.all(X[:, 1] <= 2.0 * decay * (1 + 1e-6))
    assert X_id[:, 0].max() <= 6.0 < X_ood[:, 0].min()


def test_synth_problem_is_solvable_and_its_oracle_is_a_symbolic_solution():
    p = params_for("llm_srbench")
    for domain in method.DOMAINS:
        problem = method.synth_problem(domain, 0, p, np.random.default_rng(3))
        found = method.discover_oracle(problem.task(), problem.truth)
        assert method.score(problem, found, p)["symbolic"] == 1.0
        assert set(problem.truth.free_symbols) <= set(problem.symbols)


def test_gplearn_program_converts_to_the_function_gplearn_predicts():
    from gplearn.functions import add2, div2, mul2, sqrt1
    from gplearn.genetic import SymbolicRegressor

    X = np.random.default_rng(0).uniform(1, 3, size=(40, 2))
    y = X[:, 0] * np.sin(X[:, 1]) + np.sqrt(X[:, 0])
    model = SymbolicRegressor(population_size=30, generations=2, function_set=method.GP_FUNCTIONS,
                              random_state=0).fit(X, y)
    a, b = sympy.symbols("a b", positive=True)
    expr = method.gplearn_to_sympy(model._program.program, (a, b))
    np.testing.assert_allclose(method.evaluate(expr, (a, b), X), model.predict(X), rtol=1e-9)
    hand = method.gplearn_to_sympy([add2, mul2, 0, 1, div2, sqrt1, 0, 0.5], (a, b))
    np.testing.assert_allclose(method.evaluate(hand, (a, b), X), X[:, 0] * X[:, 1] + np.sqrt(X[:, 0]) / 0.5)


def test_least_squares_fit_is_the_bfgs_optimum_of_the_skeleton_mse():
    rng = np.random.default_rng(0)
    columns, y = rng.normal(size=(50, 3)), rng.normal(size=50)
    coefficients, error = method._fit_linear(columns, y)
    bfgs = minimize(lambda c: np.mean((columns @ c - y) ** 2), np.zeros(3), method="BFGS", options={"gtol": 1e-10})
    np.testing.assert_allclose(coefficients, bfgs.x, atol=1e-5)
    assert error == pytest.approx(bfgs.fun / np.var(y), rel=1e-6)


def test_memorizer_recalls_a_law_under_renamed_and_permuted_inputs():
    a, b, c = sympy.symbols("a b c", positive=True)
    X = np.random.default_rng(0).uniform(1, 5, size=(80, 3))
    task = method.Task("renamed I.47.23", (a, b, c), X, 3 * np.sqrt(X[:, 2] * X[:, 0] / X[:, 1]))
    found = method.discover_memorized(task)
    assert method.is_symbolic_solution(found, sympy.sqrt(c * a / b), (a, b, c), X, decimals=3)
    unknown = method.Task("not a law", (a, b, c), X, X[:, 0] ** 3 - X[:, 1] * X[:, 2])
    assert not method.is_symbolic_solution(method.discover_memorized(unknown), a**3 - b * c, (a, b, c), X, 3)


def test_skeleton_search_finds_a_form_inside_its_library():
    p = params_for("llm_srbench", search_iterations=1500)
    x, t = sympy.symbols("x t", positive=True)
    X = np.random.default_rng(0).uniform(0.5, 3, size=(100, 2))
    truth = sympy.Float(1.5) * x**2 - sympy.Float(0.7) * x * sympy.sin(t)
    task = method.Task("in library", (x, t), X, method.evaluate(truth, (x, t), X))
    found = method.discover_skeleton_search(task, p, np.random.default_rng(0))
    assert method.is_symbolic_solution(found, truth, (x, t), X, decimals=3)


def test_skeleton_edits_are_the_same_under_another_string_hash_seed():
    """The determinism test reruns in one process; a frozenset's order changes only across processes."""
    script = ("import numpy as np\n"
              "from flows.llm_srbench import method\n"
              "skeleton = frozenset([(('sin', 0),), (('x', 1),), (('log', 0), ('x^2', 1)), (), (('exp(-x)', 1),)])\n"
              "rng = np.random.default_rng(0)\n"
              "print([sorted(method._mutate(skeleton, rng, d=2, max_terms=6)) for _ in range(40)])\n")
    outputs = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONHASHSEED": str(h), "PYTHONPATH": str(ROOT)}).stdout
               for h in (1, 2)}
    assert len(outputs) == 1 and outputs.pop().startswith("[[")
