"""The map's regions (Dankers et al. 2023 §6.1 removal grid, §6.2 specialised corpora) and
beam-search decoding for the removal experiments: known answers on hand-made inputs."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from tokenbook.memorisation_cartography.regions import (POLYGONS, grid_centres, in_polygon,
                                                        paired_differences, polygon_distance,
                                                        predict_map, seed_differences,
                                                        specialised_corpus)

UNIT_SQUARE = ((0.0, 0.0), (1.0, 0.0), (1.0, 1.0), (0.0, 1.0))


# --------------------------------------------------------------------------- §6.1 grid
@pytest.mark.parametrize("size, n_cells", [(10, 55), (3, 6), (1, 1)])
def test_grid_is_the_triangle_on_and_below_the_diagonal(size, n_cells):
    g = grid_centres(size)
    assert len(g) == n_cells == size * (size + 1) // 2
    assert list(g.columns) == ["cell", "i", "j", "tm", "gs", "cm"]
    assert ((g.gs > 0) & (g.gs <= g.tm) & (g.tm <= 1)).all()
    assert (g.cm == g.tm - g.gs).all() and (g.cm >= 0).all()
    assert not g.duplicated(["i", "j"]).any() and g.cell.is_unique
    assert np.allclose(g.tm, g.i / size) and np.allclose(g.gs, g.j / size)
    # ordered by i then j; the corner (1, 1) is the last cell
    assert list(zip(g.i, g.j)) == sorted(zip(g.i, g.j))
    assert (g.tm.iloc[-1], g.gs.iloc[-1]) == (1.0, 1.0)
    if size == 3:
        assert set(zip(g.i, g.j)) == {(1, 1), (2, 1), (2, 2), (3, 1), (3, 2), (3, 3)}
        assert g.cell.iloc[1] == "tm0.67-gs0.33"


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "10"])
def test_grid_rejects_bad_sizes(bad):
    with pytest.raises(ValueError, match="55 cells"):
        grid_centres(bad)


# --------------------------------------------------------------------------- paired differences
def _results() -> pd.DataFrame:
    rows = [
        # control: seeds 0-3
        ("random", 0, 50, -1.0, 0.0), ("random", 1, 52, -1.1, 0.25),
        ("random", 2, 51, -0.9, 0.5), ("random", 3, 49, -1.0, 0.75),
        # cell_a: seeds 0-2 shared with the control, seed 5 is not (must be ignored in diff)
        ("cell_a", 0, 45, -1.5, 0.1), ("cell_a", 1, 49, -0.5, np.nan),
        ("cell_a", 2, 47, -1.0, 0.6), ("cell_a", 5, 99, 0.0, 0.9),
        # cell_b: constant differences (+10 BLEU, 0 log-prob, +0.5 hallucination share)
        ("cell_b", 0, 60, -1.0, 0.5), ("cell_b", 1, 62, -1.1, 0.75),
        ("cell_b", 2, 61, -0.9, 1.0), ("cell_b", 3, 59, -1.0, 1.25),
        # cell_c: a single shared seed
        ("cell_c", 3, 40, -2.0, 0.0),
    ]
    t = pd.DataFrame(rows, columns=["condition", "seed", "bleu", "test_logprob",
                                    "hallucination_rate"])
    return t.sample(frac=1.0, random_state=3).reset_index(drop=True)  # row order must not matter


def test_paired_differences_match_a_hand_computed_t_interval():
    res = _results()
    out = paired_differences(res)
    assert list(out.columns) == ["condition", "metric", "mean", "control_mean", "diff", "ci_low",
                                 "ci_high", "n_seeds", "excludes_zero"]
    assert len(out) == 3 * 3 and "random" not in set(out.condition)
    c = out.set_index(["condition", "metric"])

    # cell_a BLEU: seeds 0, 1, 2 -> differences -5, -3, -4
    d = np.array([45 - 50, 49 - 52, 47 - 51], float)
    lo, hi = stats.t.interval(0.95, 2, loc=d.mean(), scale=d.std(ddof=1) / np.sqrt(3))
    r = c.loc[("cell_a", "bleu")]
    assert r["diff"] == pytest.approx(-4.0) and r["n_seeds"] == 3
    assert (r.ci_low, r.ci_high) == (pytest.approx(lo), pytest.approx(hi))
    assert hi < 0 and bool(r.excludes_zero) is True
    assert r["mean"] == pytest.approx((45 + 49 + 47 + 99) / 4)   # all of the condition's seeds
    assert r["control_mean"] == pytest.approx((50 + 52 + 51 + 49) / 4)

    # cell_a log-prob: differences -0.5, +0.6, -0.1 -> interval straddles zero
    d = np.array([-1.5 - -1.0, -0.5 - -1.1, -1.0 - -0.9])
    lo, hi = stats.t.interval(0.95, 2, loc=d.mean(), scale=d.std(ddof=1) / np.sqrt(3))
    r = c.loc[("cell_a", "test_logprob")]
    assert r["diff"] == pytest.approx(d.mean())
    assert (r.ci_low, r.ci_high) == (pytest.approx(lo), pytest.approx(hi))
    assert lo < 0 < hi and bool(r.excludes_zero) is False

    # cell_a hallucination: seed 1 is NaN -> only seeds 0 and 2 count
    d = np.array([0.1 - 0.0, 0.6 - 0.5])
    lo, hi = stats.t.interval(0.95, 1, loc=d.mean(), scale=d.std(ddof=1) / np.sqrt(2))
    r = c.loc[("cell_a", "hallucination_rate")]
    assert r.n_seeds == 2 and r["diff"] == pytest.approx(0.1)
    assert (r.ci_low, r.ci_high) == (pytest.approx(lo), pytest.approx(hi))

    # cell_b: constant differences -> zero-width intervals at the difference
    for metric, diff, excl in [("bleu", 10.0, True), ("test_logprob", 0.0, False),
                               ("hallucination_rate", 0.5, True)]:
        r = c.loc[("cell_b", metric)]
        assert r["diff"] == diff and r.ci_low == r.ci_high == diff and r.n_seeds == 4
        assert bool(r.excludes_zero) is excl

    # cell_c: one seed -> a difference but no interval
    r = c.loc[("cell_c", "bleu")]
    assert r["diff"] == 40 - 49 and r.n_seeds == 1
    assert np.isnan(r.ci_low) and np.isnan(r.ci_high) and bool(r.excludes_zero) is False

    # alpha: a 90% interval, narrower, again equal to scipy's
    d = np.array([-5.0, -3.0, -4.0])
    r90 = paired_differences(res, alpha=0.1, metrics=["bleu"]).set_index(
        ["condition", "metric"]).loc[("cell_a", "bleu")]
    lo, hi = stats.t.interval(0.90, 2, loc=-4.0, scale=d.std(ddof=1) / np.sqrt(3))
    assert (r90.ci_low, r90.ci_high) == (pytest.approx(lo), pytest.approx(hi))
    assert r90.ci_high - r90.ci_low < c.loc[("cell_a", "bleu")].ci_high - c.loc[
        ("cell_a", "bleu")].ci_low

    # another control
    alt = paired_differences(res, control="cell_b", metrics=["bleu"]).set_index("condition")
    assert alt.loc["random", "diff"] == -10.0 and "cell_b" not in alt.index


def test_paired_differences_reject_bad_tables():
    res = _results()
    with pytest.raises(ValueError, match="no control condition 'baseline'"):
        paired_differences(res, control="baseline")
    with pytest.raises(ValueError, match="no control condition"):
        paired_differences(res[res.condition != "random"])
    with pytest.raises(ValueError, match=r"one row per \(condition, seed\)"):
        paired_differences(pd.concat([res, res.iloc[[0]]], ignore_index=True))
    with pytest.raises(ValueError, match="missing column"):
        paired_differences(res.drop(columns="bleu"))


def test_seed_differences_are_sorted_by_seed():
    res = _results()
    assert seed_differences(res, "cell_a", "bleu") == [-5.0, -3.0, -4.0]   # seeds 0, 1, 2
    assert seed_differences(res, "cell_b", "bleu") == [10.0] * 4
    h = seed_differences(res, "cell_a", "hallucination_rate")
    assert h[0] == pytest.approx(0.1) and np.isnan(h[1]) and h[2] == pytest.approx(0.1)
    assert seed_differences(res, "random", "bleu", control="cell_b") == [-10.0] * 4
    with pytest.raises(ValueError, match="need the conditions"):
        seed_differences(res, "cell_z", "bleu")
    with pytest.raises(ValueError, match="need the conditions"):
        seed_differences(res, "cell_a", "bleu", control="baseline")


# --------------------------------------------------------------------------- §6.2 polygons
def test_polygons_on_the_unit_square():
    pts = [(0.5, 0.5), (0.0, 0.0), (1.0, 0.3), (0.5, 1.0), (2.0, 0.5), (2.0, 2.0), (-1.0, -1.0),
           (0.5, -0.25), (np.nan, 0.5)]
    assert in_polygon(pts, UNIT_SQUARE).tolist() == [True, True, True, True, False, False, False,
                                                     False, False]
    d = polygon_distance(pts, UNIT_SQUARE)
    assert d[:4].tolist() == [0.0] * 4
    assert d[4:8] == pytest.approx([1.0, np.sqrt(2), np.sqrt(2), 0.25])
    assert d[8] == np.inf
    # vertex order (clockwise / counter-clockwise) and a closed ring do not matter
    for verts in (UNIT_SQUARE[::-1], UNIT_SQUARE + UNIT_SQUARE[:1]):
        assert in_polygon(pts, verts).tolist() == in_polygon(pts, UNIT_SQUARE).tolist()
        assert np.array_equal(polygon_distance(pts, verts), d)
    # a single point works too
    assert in_polygon((0.5, 0.5), UNIT_SQUARE).tolist() == [True]
    with pytest.raises(ValueError, match=r"shape \(n, 2\)"):
        in_polygon([(0.1, 0.2, 0.3)], UNIT_SQUARE)


def test_the_papers_two_polygons():
    hal, lp = POLYGONS["bleu_hal"], POLYGONS["log_probability"]
    assert in_polygon([(0.9, 0.1)], hal)[0] and in_polygon([(0.9, 0.1)], lp)[0]
    assert not in_polygon([(0.2, 0.9)], hal)[0] and not in_polygon([(0.2, 0.9)], lp)[0]
    # boundary points are inside: vertices, the hypotenuse at GS 0.5 (TM 0.8), the diagonal
    hal_edge = [(0.6, 0.0), (1.0, 1.0), (1.0, 0.0), (0.8, 0.5), (1.0, 0.3), (0.7, 0.0)]
    lp_edge = [(0.0, 0.0), (0.4, 0.4), (1.0, 0.4), (1.0, 0.0), (0.2, 0.2), (0.7, 0.4), (0.5, 0.0)]
    assert in_polygon(hal_edge, hal).all() and (polygon_distance(hal_edge, hal) == 0).all()
    assert in_polygon(lp_edge, lp).all() and (polygon_distance(lp_edge, lp) == 0).all()
    # just off the boundary is outside
    assert not in_polygon([(0.79, 0.5)], hal)[0] and not in_polygon([(0.7, 0.41)], lp)[0]
    # (0.5, 0.5) to bleu_hal: the nearest point lies on the line (0.6, 0)-(1, 1), direction
    # (0.4, 1); distance = |cross((0.4, 1), (-0.1, 0.5))| / |(0.4, 1)| = 0.3 / sqrt(1.16)
    assert polygon_distance([(0.5, 0.5)], hal)[0] == pytest.approx(0.3 / np.sqrt(1.16))
    # (0.5, 0) to bleu_hal: 0.1 to the vertex (0.6, 0); (0.5, 0.5) to log_probability: 0.1
    assert polygon_distance([(0.5, 0.0)], hal)[0] == pytest.approx(0.1)
    assert polygon_distance([(0.5, 0.5)], lp)[0] == pytest.approx(0.1)
    # above the diagonal edge of log_probability: perpendicular distance |tm - gs| / sqrt 2
    assert polygon_distance([(0.3, 0.35)], lp)[0] == pytest.approx(0.05 / np.sqrt(2))
    assert not in_polygon([(0.3, 0.35)], lp)[0]
    assert polygon_distance([(np.nan, np.nan)], hal)[0] == np.inf
    assert not in_polygon([(np.nan, 0.1)], hal)[0]


@pytest.mark.parametrize("verts", [
    ((0.0, 0.0), (1.0, 0.5), (0.0, 1.0), (0.3, 0.5)),              # arrowhead (non-convex)
    ((0.0, 0.0), (1.0, 1.0), (1.0, 0.0), (0.0, 1.0)),              # bow tie (self-crossing)
    tuple((np.cos(np.pi / 2 + 4 * np.pi * k / 5), np.sin(np.pi / 2 + 4 * np.pi * k / 5))
          for k in range(5)),                                       # pentagram: turns one way
    ((0.0, 0.0), (0.5, 0.5), (1.0, 1.0)),                          # collinear
    ((0.0, 0.0), (1.0, 1.0)),                                      # two vertices
    ((0.0, 0.0), (1.0, 0.0), (1.0, 0.0), (0.0, 0.0)),              # repeated vertices: a segment
    ((0.0, 0.0, 0.0), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0)),           # not 2-D
])
def test_bad_polygons_raise(verts):
    with pytest.raises(ValueError, match="polygon"):
        in_polygon([(0.5, 0.5)], verts)
    with pytest.raises(ValueError, match="polygon"):
        polygon_distance([(0.5, 0.5)], verts)


# --------------------------------------------------------------------------- specialised corpora
def _pool():
    """Eleven pairs; token counts in the comments; polygon bleu_hal."""
    sources = ["a b",            # 0: inside (0.9, 0.1), 2 tokens
               "a b c",          # 1: inside (0.95, 0.5), 3
               "a",              # 2: inside, on a vertex (1, 1), 1
               "a b",            # 3: outside, distance 0.1, 2
               "a b c d",        # 4: outside, distance 0.279, 4
               "a b c",          # 5: outside, far (0.2, 0.9), 3
               "a b",            # 6: outside, farthest (0.0, 1.0), 2
               "a b c d e",      # 7: no prediction, 5
               "a",              # 8: NaN prediction, 1
               "x y z w v u"]    # 9: outside, distance 0.2 (0.4, 0), 6
    pred = pd.DataFrame({"pair_id": [0, 1, 2, 3, 4, 5, 6, 8, 9],
                         "tm_pred": [0.9, 0.95, 1.0, 0.5, 0.5, 0.2, 0.0, np.nan, 0.4],
                         "gs_pred": [0.1, 0.5, 1.0, 0.0, 0.5, 0.9, 1.0, 0.3, 0.0]})
    return pred.sample(frac=1.0, random_state=1).reset_index(drop=True), sources


def _tokens(sources, ids):
    return sum(len(sources[i].split()) for i in ids)


def test_specialised_corpus_takes_inside_pairs_then_the_nearest():
    pred, src = _pool()
    inside = {0, 1, 2}                                     # 6 tokens
    # budget below the inside tokens: only inside pairs, any seed
    for seed in range(8):
        ids, info = specialised_corpus(pred, src, polygon="bleu_hal", token_budget=4, seed=seed)
        assert set(ids.tolist()) <= inside and _tokens(src, ids) >= 4
        assert info["inside_token_share"] == 1.0 and info["n_inside"] == 3
        assert info["n_pairs"] == len(ids) and info["src_tokens"] == _tokens(src, ids)
        assert ids.tolist() == sorted(ids.tolist())
    # the same seed gives the same corpus; the seed changes which inside pairs come first
    a, _ = specialised_corpus(pred, src, polygon="bleu_hal", token_budget=4, seed=3)
    b, _ = specialised_corpus(pred, src, polygon="bleu_hal", token_budget=4, seed=3)
    assert np.array_equal(a, b)
    corpora = {tuple(specialised_corpus(pred, src, polygon="bleu_hal", token_budget=4,
                                        seed=s)[0]) for s in range(20)}
    assert len(corpora) > 1 and all(set(c) <= inside for c in corpora)
    # budget 7 > 6 inside tokens: all inside, then the nearest outside pair (3, distance 0.1)
    for seed in range(5):
        ids, info = specialised_corpus(pred, src, polygon="bleu_hal", token_budget=7, seed=seed)
        assert ids.tolist() == [0, 1, 2, 3]
        assert info["inside_token_share"] == pytest.approx(6 / 8) and info["src_tokens"] == 8
    # budget 9: then pair 9 (distance 0.2, 6 tokens) before 4 (0.279) -> 14 tokens, share 6/14
    ids, info = specialised_corpus(pred, src, polygon="bleu_hal", token_budget=9)
    assert ids.tolist() == [0, 1, 2, 3, 9] and info["src_tokens"] == 14
    assert info["inside_token_share"] == pytest.approx(6 / 14) and info["n_pairs"] == 5
    # budget 15: next pair 4 -> 18 tokens; the far pairs 5 and 6 still untouched
    ids, _ = specialised_corpus(pred, src, polygon="bleu_hal", token_budget=15)
    assert ids.tolist() == [0, 1, 2, 3, 4, 9]
    # every pair with a prediction (23 tokens): 7 (no prediction) and 8 (NaN) never taken
    ids, info = specialised_corpus(pred, src, polygon="bleu_hal", token_budget=23)
    assert ids.tolist() == [0, 1, 2, 3, 4, 5, 6, 9] and info["src_tokens"] == 23


def test_specialised_corpus_keeps_duplicate_groups_whole():
    pred, src = _pool()
    groups = np.arange(len(src))
    groups[6] = groups[4]            # the far pair 6 is a copy of pair 4
    # budget 15 reaches pair 4, which brings pair 6 along (2 more tokens)
    ids, info = specialised_corpus(pred, src, polygon="bleu_hal", token_budget=15, groups=groups)
    assert ids.tolist() == [0, 1, 2, 3, 4, 6, 9] and info["src_tokens"] == 20
    assert info["inside_token_share"] == pytest.approx(6 / 20)
    # inside copies: pair 1 and a copy of it (pair 10, same prediction) go together
    src2 = src + ["a b c"]
    pred2 = pd.concat([pred, pd.DataFrame({"pair_id": [10], "tm_pred": [0.95],
                                           "gs_pred": [0.5]})], ignore_index=True)
    groups2 = np.r_[np.arange(len(src)), 1]
    for seed in range(12):
        ids, info = specialised_corpus(pred2, src2, polygon="bleu_hal", token_budget=2,
                                       groups=groups2, seed=seed)
        s = set(ids.tolist())
        assert (1 in s) == (10 in s) and s <= {0, 1, 2, 10} and _tokens(src2, ids) >= 2
        assert info["n_inside"] == 4


def test_specialised_corpus_with_vertices_and_errors():
    pred, src = _pool()
    # a polygon given by its vertices: the right half of the unit square
    half = ((0.5, 0.0), (1.0, 0.0), (1.0, 1.0), (0.5, 1.0))
    ids, info = specialised_corpus(pred, src, polygon=half, token_budget=12)
    assert ids.tolist() == [0, 1, 2, 3, 4] and info["n_inside"] == 5
    assert info["inside_token_share"] == 1.0
    # the other named polygon: GS <= 0.4 below the diagonal holds 0, 3 and 9
    ids, info = specialised_corpus(pred, src, polygon="log_probability", token_budget=10)
    assert ids.tolist() == [0, 3, 9] and info["inside_token_share"] == 1.0
    with pytest.raises(ValueError, match="unknown polygon 'memorised'.*bleu_hal"):
        specialised_corpus(pred, src, polygon="memorised", token_budget=4)
    with pytest.raises(ValueError, match="token_budget 24 exceeds the 23 source tokens"):
        specialised_corpus(pred, src, polygon="bleu_hal", token_budget=24)
    with pytest.raises(ValueError, match="positive"):
        specialised_corpus(pred, src, polygon="bleu_hal", token_budget=0)
    with pytest.raises(ValueError, match="index the 10 sources"):
        specialised_corpus(pred.assign(pair_id=pred.pair_id + 5), src, polygon="bleu_hal",
                           token_budget=4)
    with pytest.raises(ValueError, match="missing column"):
        specialised_corpus(pred.drop(columns="gs_pred"), src, polygon="bleu_hal",
                           token_budget=4)


# --------------------------------------------------------------------------- §6.2 predictor
@pytest.fixture
def one_blas_thread():
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):      # the MLP is small: extra BLAS threads only contend
        yield


def test_predict_map_learns_a_deterministic_map(one_blas_thread):
    rng = np.random.default_rng(0)
    n = 500
    d = pd.DataFrame({"pair_id": np.arange(n) + 1000, "x1": rng.uniform(0, 1, n),
                      "x2": rng.uniform(0, 1, n)})
    d["tm"] = 0.2 + 0.7 * d.x1
    d["gs"] = 0.1 + 0.5 * d.x2 * d.x1
    d["cm"] = d.tm - d.gs
    d.loc[3, "x2"] = np.nan          # incomplete input: no prediction
    d.loc[7, "gs"] = np.nan          # unknown target, complete inputs: still a candidate
    d.loc[7, "cm"] = np.nan
    pred, metrics = predict_map(d, ["x1", "x2"], seed=0)
    assert list(pred.columns) == ["pair_id", "tm_pred", "gs_pred", "cm_pred"]
    assert len(pred) == n - 1 and pred.pair_id.is_unique
    assert 1003 not in set(pred.pair_id) and 1007 in set(pred.pair_id)
    assert np.isfinite(pred[["tm_pred", "gs_pred", "cm_pred"]].to_numpy()).all()
    m = metrics.set_index("target")
    assert list(m.index) == ["tm", "gs", "cm"]
    assert (m.n_test == 399).all()    # ceil(80% of the 498 complete rows) held out (sklearn)
    assert (m.pearson_r > 0.9).all() and (m.mae < 0.06).all()
    truth = d.set_index("pair_id").loc[pred.pair_id]
    ok = truth.gs.notna().to_numpy()
    for t in ("tm", "gs", "cm"):
        assert np.corrcoef(truth[t].to_numpy()[ok], pred[f"{t}_pred"].to_numpy()[ok])[0, 1] > 0.9
    # seeded: the same seed gives the same predictions
    again, _ = predict_map(d, ["x1", "x2"], seed=0)
    pd.testing.assert_frame_equal(pred, again)
    for bad in (0, 1, -0.1, 1.5):
        with pytest.raises(ValueError, match=r"train_share must be in \(0, 1\)"):
            predict_map(d, ["x1", "x2"], train_share=bad)


# --------------------------------------------------------------------------- beam search
@pytest.fixture(scope="module")
def tiny_marian():
    import torch

    from tokenbook.models.marian import build_marian, train_bpe_tokenizer
    from tokenbook.worlds.translation import make_translation_world

    torch.set_num_threads(1)
    w = make_translation_world(40, n_test=4, seed=0)
    src, tgt = w.pairs.source.tolist(), w.pairs.target.tolist()
    tok = train_bpe_tokenizer(src + tgt, vocab_size=120)
    return tok, build_marian(tok, seed=0), src[:5]     # untrained: decoding is deterministic


def test_translate_one_beam_is_greedy_and_beams_give_strings(tiny_marian):
    from tokenbook.models.marian import translate

    tok, model, src = tiny_marian
    greedy = translate(model, tok, src, max_new_tokens=16)
    assert translate(model, tok, src, num_beams=1, max_new_tokens=16, batch_size=2) == greedy
    beams = translate(model, tok, src, num_beams=3, max_new_tokens=16, batch_size=2)
    assert len(beams) == len(src) and all(isinstance(s, str) for s in beams)
    assert all(s == " ".join(s.split()) for s in beams)
    assert translate(model, tok, src, num_beams=3, max_new_tokens=16, batch_size=2) == beams
    assert translate(model, tok, [], num_beams=3) == []
    for bad in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match="num_beams must be a positive integer"):
            translate(model, tok, src, num_beams=bad)


# --------------------------------------------------------------------------- region claims
SEEDS = (1, 2, 3)


def _region_results(cells: pd.DataFrame | None = None):
    """Hand-made region results with known per-seed differences to ``random``.

    Grid cell c (row of ``grid_centres(3)``), seed s: Δ test_logprob = 0.1·(c + 1) + 0.01·s,
    Δ test_logprob_regular = −0.05·(c + 1) − 0.001·s, Δ bleu = c (not used by the claims).
    Specialised, seed s: bleu_hal − random: Δ bleu = −0.5·s, Δ bleu_regular = 0.1·s;
    log_probability − random: Δ test_logprob = −0.3 + 0.05·s,
    Δ test_logprob_regular = 0.02·s; the permuted-map corpora: bleu_hal_permuted − random:
    Δ bleu = 0.2·s, log_probability_permuted − random: Δ test_logprob = −0.01·s.
    """
    from tokenbook.memorisation_cartography.experiments import RegionResults

    cells = grid_centres(3) if cells is None else cells
    rows = []
    for s in SEEDS:
        base = dict(test_logprob=-2.0 - 0.1 * s, bleu=20.0 + s, hallucination_rate=0.1 * s,
                    test_logprob_regular=-1.5 - 0.1 * s, bleu_regular=25.0 - s)
        rows.append(dict(condition="random", seed=s, gs=np.nan, **base))
        for c, cell in zip(cells.index, cells.itertuples(index=False)):
            rows.append(dict(condition=cell.cell, seed=s, gs=cell.gs,
                             test_logprob=base["test_logprob"] + 0.1 * (c + 1) + 0.01 * s,
                             bleu=base["bleu"] + c, hallucination_rate=0.0,
                             test_logprob_regular=(base["test_logprob_regular"]
                                                   - 0.05 * (c + 1) - 0.001 * s),
                             bleu_regular=base["bleu_regular"]))
    grid = pd.DataFrame(rows).sample(frac=1.0, random_state=1).reset_index(drop=True)
    spec = []
    for s in SEEDS:
        r = dict(test_logprob=-2.0, bleu=20.0 + s, hallucination_rate=0.2,
                 test_logprob_regular=-1.0 - s, bleu_regular=25.0)
        spec.append(dict(condition="random", seed=s, **r))
        spec.append(dict(condition="bleu_hal", seed=s, **{
            **r, "bleu": r["bleu"] - 0.5 * s, "bleu_regular": r["bleu_regular"] + 0.1 * s,
            "test_logprob": r["test_logprob"] + 7.0, "test_logprob_regular": 9.0}))
        spec.append(dict(condition="log_probability", seed=s, **{
            **r, "test_logprob": r["test_logprob"] - 0.3 + 0.05 * s,
            "test_logprob_regular": r["test_logprob_regular"] + 0.02 * s,
            "bleu": r["bleu"] + 11.0, "bleu_regular": 0.0}))
        spec.append(dict(condition="bleu_hal_permuted", seed=s, **{
            **r, "bleu": r["bleu"] + 0.2 * s, "test_logprob": r["test_logprob"] + 5.0}))
        spec.append(dict(condition="log_probability_permuted", seed=s, **{
            **r, "test_logprob": r["test_logprob"] - 0.01 * s, "bleu": r["bleu"] - 3.0}))
    spec = pd.DataFrame(spec).sample(frac=1.0, random_state=2).reset_index(drop=True)
    empty = pd.DataFrame()
    return RegionResults(grid=grid, grid_diff=empty, specialised=spec, specialised_diff=empty,
                         corpora=empty, predictor=empty, seconds=0.0, n_runs=0)


def test_region_claim_lowgs_averages_exactly_the_low_gs_cells():
    from tokenbook.memorisation_cartography.experiments import region_claim_values

    res = _region_results()
    g = grid_centres(3)
    low = g.index[g.gs <= 0.4].tolist()
    assert low == [0, 1, 3]                     # the three cells with GS = 1/3
    v = region_claim_values(res, "removal-grid-lowgs-logprob")
    assert set(v) == {"values_on", "values_off", "computed_by"}
    assert v["computed_by"] == "tokenbook.memorisation_cartography.experiments:region_experiments"
    on = [np.mean([0.1 * (c + 1) + 0.01 * s for c in low]) for s in SEEDS]
    off = [np.mean([-0.05 * (c + 1) - 0.001 * s for c in low]) for s in SEEDS]
    assert v["values_on"] == pytest.approx(on, abs=1e-12)       # 0.2333… + 0.01·s
    assert v["values_off"] == pytest.approx(off, abs=1e-12)     # the _regular columns
    assert v["values_on"][0] == pytest.approx(0.7 / 3 + 0.01)
    # all six cells would give 0.35 + 0.01·s: the high-GS cells are left out
    assert v["values_on"][0] != pytest.approx(0.36)
    # a wider band takes the GS = 2/3 cells too
    mid = g.index[g.gs <= 0.7].tolist()
    wide = region_claim_values(res, "removal-grid-lowgs-logprob", low_gs=0.7)
    assert wide["values_on"] == pytest.approx(
        [np.mean([0.1 * (c + 1) + 0.01 * s for c in mid]) for s in SEEDS], abs=1e-12)


def test_region_claim_specialised_gives_the_per_seed_differences():
    from tokenbook.memorisation_cartography.experiments import region_claim_values

    res = _region_results()
    v = region_claim_values(res, "specialised-bleu-hal-bleu")
    assert v["values_on"] == pytest.approx([-0.5 * s for s in SEEDS], abs=1e-12)
    # off: the permuted-map corpus against random, same metric and test set (not _regular)
    assert v["values_off"] == pytest.approx([0.2 * s for s in SEEDS], abs=1e-12)
    v = region_claim_values(res, "specialised-logprob-logprob")
    assert v["values_on"] == pytest.approx([-0.3 + 0.05 * s for s in SEEDS], abs=1e-12)
    assert v["values_off"] == pytest.approx([-0.01 * s for s in SEEDS], abs=1e-12)
    # without the permuted-map corpus there is no "off" value
    res.specialised = res.specialised[res.specialised["condition"] != "bleu_hal_permuted"]
    v = region_claim_values(res, "specialised-bleu-hal-bleu")
    assert v["values_off"] == [] and len(v["values_on"]) == len(SEEDS)


def test_region_claim_errors():
    from tokenbook.memorisation_cartography.experiments import (REGION_CLAIM_IDS,
                                                                region_claim_values)

    res = _region_results()
    with pytest.raises(ValueError, match="unknown region claim 'nope'") as err:
        region_claim_values(res, "nope")
    assert all(cid in str(err.value) for cid in REGION_CLAIM_IDS)
    g = grid_centres(3)
    high = _region_results(g[g.gs > 0.4])      # only the GS = 2/3 and 1 cells
    with pytest.raises(ValueError, match="no cell with GS"):
        region_claim_values(high, "removal-grid-lowgs-logprob")


def test_region_claim_refuses_cells_run_with_different_seeds():
    from tokenbook.memorisation_cartography.experiments import region_claim_values

    res = _region_results()
    grid = res.grid
    low = sorted(set(grid.loc[grid["gs"] <= 0.4 + 1e-9, "condition"]) - {"random"})
    # two low-GS cells each lose a different seed: the per-seed means would mix seeds
    drop = ((grid["condition"] == low[0]) & (grid["seed"] == 1)) | (
        (grid["condition"] == low[1]) & (grid["seed"] == 2))
    res.grid = grid[~drop]
    with pytest.raises(ValueError, match="same seeds"):
        region_claim_values(res, "removal-grid-lowgs-logprob")


def test_permute_positions_moves_positions_not_pairs():
    from tokenbook.memorisation_cartography.regions import permute_positions, specialised_corpus

    rng = np.random.default_rng(0)
    pred = pd.DataFrame({"pair_id": np.arange(40), "tm_pred": rng.uniform(size=40),
                         "gs_pred": rng.uniform(size=40), "other": np.arange(40) * 2})
    out = permute_positions(pred, seed=3)
    assert out["pair_id"].tolist() == pred["pair_id"].tolist()
    assert out["other"].tolist() == pred["other"].tolist()
    # the (tm, gs) rows are moved together: the same multiset of positions
    before = sorted(zip(pred["tm_pred"], pred["gs_pred"]))
    assert sorted(zip(out["tm_pred"], out["gs_pred"])) == before
    assert (out["tm_pred"].to_numpy() != pred["tm_pred"].to_numpy()).mean() > 0.8
    pd.testing.assert_frame_equal(out, permute_positions(pred, seed=3))
    assert not out.equals(permute_positions(pred, seed=4))
    # a corpus selected on the permuted map has the same size as the real selection
    sources = ["a b c"] * 40
    real, _ = specialised_corpus(pred, sources, polygon="bleu_hal", token_budget=30, seed=1)
    null, _ = specialised_corpus(out, sources, polygon="bleu_hal", token_budget=30, seed=1)
    assert len(real) == len(null) == 10 and set(real) != set(null)
    with pytest.raises(ValueError, match="gs_pred"):
        permute_positions(pred.drop(columns=["gs_pred"]), seed=0)


def test_specialised_conditions_add_a_permuted_map_corpus_per_polygon(monkeypatch):
    """The §6.2 null: each polygon also selects on the permuted predicted map, with the same
    token budget as the real selection and the random corpus; seeded by the root seed."""
    from types import SimpleNamespace

    import tokenbook.memorisation_cartography.experiments as E
    from tokenbook.memorisation_cartography.features import FEATURES
    from tokenbook.memorisation_cartography.regions import POLYGONS

    rng = np.random.default_rng(0)
    n = 80
    words = ["w%d" % i for i in range(30)]
    sources = [" ".join(rng.choice(words, size=rng.integers(2, 9))) for _ in range(n)]
    pairs = pd.DataFrame({"pair_id": np.arange(n), "source": sources, "target": sources,
                          "group_id": np.arange(n)})
    tm = rng.uniform(size=n)
    data = pd.DataFrame({"pair_id": np.arange(n), "tm": tm, "gs": tm * rng.uniform(size=n),
                         "cm": rng.uniform(size=n)})
    for f in FEATURES[:3]:
        data[f] = tm + rng.normal(scale=0.1, size=n)
    monkeypatch.setattr(E, "analysis_table", lambda art: data)
    art = SimpleNamespace(seed=5, corpus=SimpleNamespace(pairs=pairs))
    keep, corpora, _ = E.specialised_conditions(art, token_share=0.3)
    names = [*POLYGONS, *(f"{p}{E.PERMUTED}" for p in POLYGONS), "random"]
    assert sorted(keep) == sorted(names)
    assert sorted(corpora["condition"]) == sorted(names)
    tokens = np.array([len(s.split()) for s in sources])
    budget = int(0.3 * tokens.sum())
    for name in names:
        assert tokens[keep[name]].sum() >= budget          # every corpus meets the budget
    for p in POLYGONS:
        assert set(keep[p]) != set(keep[f"{p}{E.PERMUTED}"])
    again, _, _ = E.specialised_conditions(art, token_share=0.3)
    assert all(np.array_equal(keep[k], again[k]) for k in names)   # seeded by the root seed
    other, _, _ = E.specialised_conditions(SimpleNamespace(seed=6, corpus=art.corpus),
                                           token_share=0.3)
    assert any(not np.array_equal(keep[k], other[k]) for k in names)


def test_region_experiments_run_each_root_seeds_own_map_in_one_fan_out(monkeypatch):
    """Each root seed is its own replicate: its map's grid and corpora, its model seed; the
    tables carry root_seed, every condition is paired with random removal at the same model
    seed, and all retrainings go out in one fan-out."""
    from types import SimpleNamespace

    import tokenbook.memorisation_cartography.experiments as E

    metrics = {"test_logprob": 0.0, "bleu": 0.0, "hallucination_rate": 0.0}
    cells = pd.DataFrame({"cell": ["c0"], "i": [1], "j": [1], "tm": [0.5], "gs": [0.5]})
    fanned = []

    def fake_jobs(art, removed, seeds, *, kind, num_beams):
        paths = {(name, s): f"{art.seed}|{kind}|{name}|{s}" for name in removed for s in seeds}
        return [SimpleNamespace(done=lambda: False) for _ in paths], paths

    def fake_load(paths):
        rows = []
        for p in paths:
            root, kind, name, s = p.split("|")
            shift = -1.0 if name != "random" else 0.0      # every cell: −1 nats vs random
            rows.append({"condition": name, "seed": int(s), **metrics,
                         "test_logprob": shift + int(root)})
        return pd.DataFrame(rows)

    monkeypatch.setattr(E, "grid_conditions", lambda art, size: (
        {"c0": np.array([0, 1]), "random": np.array([2])}, cells))
    monkeypatch.setattr(E, "specialised_conditions", lambda art, token_share: (
        {"bleu_hal": np.array([0]), "random": np.array([1])},
        pd.DataFrame({"condition": ["bleu_hal", "random"]}), pd.DataFrame({"r": [0.5]})))
    monkeypatch.setattr(E, "_region_jobs", fake_jobs)
    monkeypatch.setattr(E, "fan_out", lambda jobs, **kw: fanned.append(len(jobs)))
    monkeypatch.setattr(E, "load_removal_results", fake_load)
    cm = pd.DataFrame({"pair_id": [0, 1, 2], "tm": 0.5, "gs": 0.4, "cm": 0.1})
    arts = [SimpleNamespace(seed=s, cm=lambda: cm, corpus=SimpleNamespace(
        pairs=pd.DataFrame({"pair_id": [0, 1, 2]}))) for s in (3, 4, 5)]
    r = E.region_experiments(arts, n_train_seeds=1, progress=False)
    assert fanned == [3 * (2 + 2)]                      # one fan-out: 3 roots × 4 conditions
    assert sorted(set(r.grid["root_seed"])) == [3, 4, 5]
    assert sorted(set(r.corpora["root_seed"])) == [3, 4, 5] and len(r.predictor) == 3
    row = r.grid_diff[(r.grid_diff["condition"] == "c0")
                      & (r.grid_diff["metric"] == "test_logprob")].iloc[0]
    assert row["diff"] == pytest.approx(-1.0) and row["n_seeds"] == 3
    v = E.region_claim_values(r, "specialised-bleu-hal-bleu")
    assert len(v["values_on"]) == 3                    # one value per root seed
    with pytest.raises(ValueError, match="at least one root seed"):
        E.region_experiments([], progress=False)
