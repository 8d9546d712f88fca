"""kindel_del: the enumeration against hand-written products and atom bookkeeping, the enrichment on a hand case,
the count simulator against its closed form at infinite depth, the on-DNA penalty's structure, the splits' leakage
rules, the GIN's batching, and DEL-Compose recovering the planted affinities (the smoke run, determinism and params
come from test_papers.py)."""

import numpy as np
import pytest
from conftest import params_for
from rdkit import Chem
from scipy import stats

from flows.kindel_del import method


@pytest.fixture(scope="module")
def small():
    p = params_for("kindel_del", synthons_per_cycle=5)
    return p, method.make_library(p)


def test_enumeration_gives_the_hand_written_products(small):
    p, lib = small
    assert len(set(lib.smiles)) == 5 ** 3 and lib.synthons.tolist()[:2] == [[0, 0, 0], [0, 0, 1]]
    # glycine methyl amide + 6-chloronicotinic acid (amide) + morpholine (SNAr on the chloropyridine)
    expected = Chem.CanonSmiles("CNC(=O)CNC(=O)c1ccc(N2CCOCC2)nc1")
    assert lib.smiles[int(np.flatnonzero((lib.synthons == [0, 1, 0]).all(axis=1))[0])] == expected


def test_every_product_keeps_the_synthons_atoms_minus_the_leaving_oh_and_halide(small):
    p, lib = small
    heavy = [[Chem.MolFromSmiles(s).GetNumHeavyAtoms() for s in cycle[:5]]
             for cycle in (method.CYCLE_A, method.CYCLE_B, method.CYCLE_C)]
    for smiles, (a, b, c) in zip(lib.smiles, lib.synthons):
        assert Chem.MolFromSmiles(smiles).GetNumHeavyAtoms() == heavy[0][a] + heavy[1][b] + heavy[2][c] - 2
    atoms_per_molecule = np.bincount(lib.graphs.molecule)
    assert atoms_per_molecule.tolist() == [Chem.MolFromSmiles(s).GetNumAtoms() for s in lib.smiles]
    bonds = sum(Chem.MolFromSmiles(s).GetNumBonds() for s in lib.smiles)
    assert lib.graphs.edge_index.shape == (2, 2 * bonds)
    assert (lib.graphs.molecule[lib.graphs.edge_index[0]] == lib.graphs.molecule[lib.graphs.edge_index[1]]).all()


def test_enrichment_on_a_hand_case():
    target = np.array([[1, 2, 0], [0, 0, 0]])
    matrix = np.array([[0, 0, 1], [1, 1, 1]])
    # sums: target (3, 0), matrix (1, 3); library totals 3 and 4
    assert method.enrichment(target, matrix) == pytest.approx([np.log(4 / 2) - np.log(3 / 4), np.log(1 / 4) - np.log(3 / 4)])


def test_screen_enrichment_reaches_its_closed_form_at_infinite_depth(small):
    p, lib = small
    setting = method.Setting(depth=1e8, nonspecific=0.8, linker_penalty=1.0)
    screen = method.simulate_screen(lib, p, setting, np.random.default_rng(4))
    bound = 1 / (1 + 10 ** (p.protein_p - screen.pkd_on))
    sticky = np.exp(setting.nonspecific * (lib.logp - lib.logp.mean()) / lib.logp.std())
    # abundance cancels between a compound's target and matrix counts; up to the library-total normalisation
    # (a constant, checked on the hand case) only the binding ratio is left
    log_ratio = np.log((bound + p.nonspecific_base * sticky) / (p.nonspecific_base * sticky))
    assert np.ptp(screen.enrichment - log_ratio) < 2e-3 and np.ptp(log_ratio) > 1
    assert screen.target.shape == screen.matrix.shape == (len(lib.smiles), p.replicates)


def test_on_dna_penalty_depends_on_the_cycle_a_synthon_only(small):
    p, lib = small
    off, on = method.ground_truth(lib, p, linker_penalty=1.5, rng=np.random.default_rng(1))
    gap = off - on
    assert ((gap >= 0) & (gap <= 1.5)).all() and gap.std() > 0
    for a in range(5):
        assert np.ptp(gap[lib.synthons[:, 0] == a]) == pytest.approx(0.0, abs=1e-12)


def test_splits_are_disjoint_and_the_disynthon_split_never_shares_a_b_c_pair(small):
    p, lib = small
    rng = np.random.default_rng(0)
    on, off = method.heldout_sets(lib, p, rng)
    assert len(set(on) | set(off)) == 2 * p.heldout_size
    pool = np.setdiff1d(np.arange(len(lib.smiles)), np.concatenate([on, off]))
    for train_idx, test_idx in (method.random_split(pool, p, rng), method.disynthon_split(lib, pool, p, rng)):
        assert np.intersect1d(train_idx, test_idx).size == 0 and np.union1d(train_idx, test_idx).tolist() == pool.tolist()
    train_idx, test_idx = method.disynthon_split(lib, pool, p, rng)
    pair = lambda idx: set(map(tuple, lib.synthons[idx, 1:]))
    assert pair(train_idx).isdisjoint(pair(test_idx))
    assert len(pair(test_idx)) == round(p.test_fraction * 25)


def test_gin_prediction_of_a_molecule_does_not_depend_on_its_batch(small):
    p, lib = small
    y = np.linspace(0, 1, 40)
    predict = method.fit_gin(lib, p, np.arange(40), y, seed=0)
    alone = predict(np.array([7]))
    together = predict(np.array([30, 7, 2]))
    assert together[1] == pytest.approx(alone[0], abs=1e-5)
    assert predict(np.array([2, 30])) == pytest.approx(together[[2, 0]], abs=1e-5)


def test_compose_recovers_the_planted_affinity_ranking_from_deep_counts():
    p = params_for("kindel_del", synthons_per_cycle=6, epochs=60, batch_size=64, learning_rate=0.01)
    lib = method.make_library(p)
    rng = np.random.default_rng(3)
    screen = method.simulate_screen(lib, p, method.Setting(depth=200.0, nonspecific=0.25, linker_penalty=0.5), rng)
    everything = np.arange(len(lib.smiles))
    latent = method.fit_compose(lib, screen, p, everything, seed=0)(everything)
    recovered = stats.spearmanr(latent, screen.pkd_on).statistic
    assert recovered > 0.85
    # and the count columns carry the signal: counts permuted across compounds leave only the chance agreement of
    # a smooth function of the synthons with the (synthon-additive) truth
    shuffle = rng.permutation(len(everything))
    permuted = method.Screen(screen.pkd_off, screen.pkd_on, screen.load[shuffle], screen.target[shuffle],
                             screen.matrix[shuffle], screen.enrichment[shuffle])
    latent = method.fit_compose(lib, permuted, p, everything, seed=0)(everything)
    assert abs(stats.spearmanr(latent, screen.pkd_on).statistic) < recovered - 0.3
