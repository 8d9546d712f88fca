"""Two looks at a paper's claims: more seeds only where the first seeds left a claim undecided.

A paper with a ``seed_cap`` is judged twice at most. **Look 1** scores its first ``seeds`` seeds; a claim it
decides (reproduced or not reproduced) keeps that verdict. If any claim is left inconclusive, ``paperflows extend``
raises ``extra_seeds`` (up to the cap, within ``common.extension_budget_s`` of training) in ``params.yaml``, the records stage runs only the new seeds, and **look 2**
scores all of them for the claims look 1 left open.

Looking twice gives a false claim two chances. The rule splits the error between the looks (Bonferroni): each
look reads two-sided intervals at ``LOOK_CONFIDENCE`` = 97.5%, one-sided 1.25%, so that a claim whose true value
sits on its threshold is reproduced with probability at most 2.5% over both looks, the level a one-look claim
has. ``tests/test_sequential.py`` simulates it, and shows that reading both looks at 95% inflates it. A paper
with a cap reads look 1 at 97.5% whether or not it is extended: the split is fixed before the first look.
"""

from __future__ import annotations

from typing import Sequence

from paperflows.core.claims import ClaimResult

ALPHA_ONE_SIDED = 0.025
LOOKS = 2
LOOK_CONFIDENCE = 1.0 - 2.0 * ALPHA_ONE_SIDED / LOOKS


def opens_look_2(result: ClaimResult) -> bool:
    """Whether more seeds are for ``result``: a claim (not a sanity check) that a look left inconclusive."""
    return result.role == "claim" and result.verdict == "inconclusive"


def undecided(results: Sequence[ClaimResult]) -> list[str]:
    """Ids of the results a look left open that ask for a look 2 (:func:`opens_look_2`)."""
    return [r.id for r in results if opens_look_2(r)]


def combine_looks(first: Sequence[ClaimResult], second: Sequence[ClaimResult] | None, seed_cap: int) -> list[ClaimResult]:
    """Each claim's verdict: look 1's when it decided or when there is no look 2, else look 2's; each result
    records its seed count and why it stopped there."""
    later = {r.id: r for r in second or ()}
    combined = []
    for early in first:
        if early.verdict != "inconclusive" or early.id not in later:
            if early.verdict != "inconclusive":
                why = f"decided at look 1 ({early.seeds} seeds, each look at one-sided 1.25%)"
            elif early.seeds >= seed_cap:
                why = f"undecided at the seed cap ({seed_cap})"
            elif not opens_look_2(early):
                why = f"undecided at look 1 ({early.seeds} seeds); a sanity check opens no look 2, only a claim does"
            else:
                why = (f"undecided at look 1 ({early.seeds} seeds); no look 2 yet: `paperflows extend` adds seeds up "
                       f"to the cap ({seed_cap}) within the time budget (common.extension_budget_s)")
            combined.append(early.model_copy(update={"seeds_reason": why}))
            continue
        late = later[early.id]
        why = (f"decided at look 2 ({late.seeds} seeds; look 1 at {early.seeds} was undecided)"
               if late.verdict != "inconclusive" else
               f"undecided at look 2 ({late.seeds} seeds: "
               f"{'the seed cap' if late.seeds >= seed_cap else 'the time budget stopped short of the cap'})")
        combined.append(late.model_copy(update={"seeds_reason": why}))
    return combined
