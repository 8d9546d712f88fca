"""The attacks against a linear model, where the worst case in each norm ball is known in closed form."""

import pytest
import torch

from tasks.attacks import cross_entropy_objective, fgsm, margin_objective, pgd, project, robust_accuracy

torch.manual_seed(0)
W = torch.randn(10)
X = torch.randn(32, 10)


def linear(inputs: torch.Tensor) -> torch.Tensor:
    return inputs @ W + 0.3


@pytest.mark.parametrize("norm, dual_norm", [("linf", W.abs().sum()), ("l2", W.norm())])
def test_pgd_reaches_the_closed_form_worst_case_of_a_linear_objective(norm, dual_norm):
    eps = 0.2
    adversarial = pgd(linear, X, eps=eps, step_size=eps / 3, steps=20, norm=norm, bounds=None, seed=1)
    # max over the eps-ball of w . (x + delta) is w . x + eps * ||w||_dual
    torch.testing.assert_close(linear(adversarial), linear(X) + eps * dual_norm, atol=1e-4, rtol=0)


def test_fgsm_is_exact_on_a_linear_objective_in_one_step():
    adversarial = fgsm(linear, X, eps=0.1, bounds=None)
    torch.testing.assert_close(adversarial - X, 0.1 * W.sign().expand_as(X))


@pytest.mark.parametrize("norm", ["linf", "l2"])
def test_perturbations_stay_in_the_ball_and_the_pixel_box(norm):
    x = torch.rand(16, 1, 4, 4)
    def objective(inputs):
        return (inputs ** 2).flatten(1).sum(1)
    adversarial = pgd(objective, x, eps=0.3, step_size=0.1, steps=5, norm=norm, restarts=2, seed=0)
    delta = (adversarial - x).flatten(1)
    size = delta.abs().max(1).values if norm == "linf" else delta.norm(dim=1)
    assert (size <= 0.3 + 1e-6).all()
    assert adversarial.min() >= 0 and adversarial.max() <= 1
    assert torch.equal(project(torch.full((2, 3), 5.0), 1.0, "linf"), torch.ones(2, 3))


def test_restarts_keep_the_best_restart_per_sample():
    # a 1-D objective with many local maxima: restart 1 is the same run as restarts=1 (same seed),
    # so keeping the best of five can never do worse on any sample
    def wavy(inputs):
        return torch.cos(12 * inputs).flatten(1).sum(1) + inputs.flatten(1).sum(1)
    x = torch.rand(64, 1)
    one = wavy(pgd(wavy, x, eps=0.5, step_size=0.02, steps=5, restarts=1, seed=3, bounds=None))
    five = wavy(pgd(wavy, x, eps=0.5, step_size=0.02, steps=5, restarts=5, seed=3, bounds=None))
    assert (five >= one - 1e-6).all() and (five > one + 1e-3).any()


def test_margin_attack_on_a_linear_classifier_flips_exactly_the_points_within_reach():
    weights = torch.randn(2, 10)
    def classifier(inputs):
        return inputs @ weights.T
    labels = classifier(X).argmax(1)
    eps = 0.5
    adversarial = pgd(margin_objective(classifier, labels), X, eps=eps, step_size=eps / 4, steps=20, norm="l2", bounds=None)
    # a point flips iff its logit gap is below eps * ||w_1 - w_0||_2
    gap = (classifier(X)[:, 0] - classifier(X)[:, 1]).abs()
    reachable = gap < eps * (weights[1] - weights[0]).norm()
    assert torch.equal(classifier(adversarial).argmax(1) != labels, reachable)
    assert robust_accuracy(classifier, adversarial, labels) == pytest.approx(1 - reachable.float().mean().item())


def test_a_targeted_attack_moves_predictions_toward_the_target():
    weights = torch.randn(3, 10)
    def classifier(inputs):
        return inputs @ weights.T
    target = torch.full((len(X),), 2)
    adversarial = pgd(cross_entropy_objective(classifier, target, targeted=True), X, eps=3.0, step_size=0.5, steps=20,
                      norm="l2", bounds=None)
    assert (classifier(adversarial).argmax(1) == 2).float().mean() > (classifier(X).argmax(1) == 2).float().mean()


def test_invalid_budgets_are_refused():
    with pytest.raises(ValueError, match="steps"):
        pgd(linear, X, eps=0.1, step_size=0.1, steps=0)
