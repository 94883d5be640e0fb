"""Integer first crossings of a target on the closed forms of the tuned families: a bracket grown and narrowed
by interpolation (``first_crossing``), and the exact scan of every earlier step by branch and bound on the
closed forms' lower bounds (``first_hit_pruned``)."""

from __future__ import annotations

import numpy as np

from ..moments import EmaMoments, HeavyBallMoments, TwoStateMoments

__all__ = ["first_crossing", "first_hit_pruned", "scan_leaf", "BRACKET_STRIDE", "LOOSE_RTOL", "CROSS_ELEMENTS"]

BRACKET_STRIDE = 0.02  # the crossings' bracket grows from a guess by 2% of it, doubling
LOOSE_RTOL = 1e-2  # ... past which the interpolation within a bracket of 1% of t is the estimate
CROSS_ELEMENTS = 1 << 15  # rows × coordinates crossed per call where several points are crossed at once


def scan_leaf(d: int) -> int:
    """Steps evaluated one by one where the lower bound does not exclude a hit: about 8192 coordinate-steps per leaf,
    4 to 256 steps (a bound costs a few evaluations of one step, so long spectra halve down to short leaves; at
    d = 10⁴ a leaf of 4 steps scans 13× faster than one of 256)."""
    return int(np.clip(8192 // max(d, 1), 4, 256))


def first_hit_pruned(
    moments: HeavyBallMoments | TwoStateMoments | EmaMoments, half_h, target: float, until: int, budget: float = np.inf
) -> int | None:
    """The first integer t < ``until`` with ½Σh E[x_t²] ≤ target (``until`` if none): branch and bound on
    intervals of t with the moments' lower bound, leaves evaluated exactly. None once more than ``budget``
    coordinate-steps have been spent (a leaf costs its steps, a bound about one step, times the coordinates).

    The first intervals double in width away from ``until`` (one leaf, one leaf, two, four, …): where E[L] decreases
    to the target, the bound excludes all of them but the last leaf or so, which halving from [0, until) reaches only
    after twice as many bounds (one excluded and one split per level)."""
    leaf = scan_leaf(half_h.size)
    ends, width = [until], leaf
    while ends[-1] > 0:
        ends.append(max(ends[-1] - width, 0))
        width = width if len(ends) < 3 else 2 * width
    intervals = [(lo, hi - 1) for hi, lo in zip(ends, ends[1:])]  # the leftmost last: it is popped first
    spent = 0
    while intervals:
        if spent > budget:
            return None
        first, last = intervals.pop()
        if last < first:
            continue
        if last - first < leaf:
            ts = np.arange(first, last + 1, dtype=np.float64)
            spent += ts.size * half_h.size
            with np.errstate(over="ignore", invalid="ignore"):
                hit = np.nonzero(moments.at(ts[:, None]) @ half_h <= target)[0]
            if hit.size:
                return int(ts[hit[0]])
            continue
        spent += half_h.size
        with np.errstate(over="ignore", invalid="ignore"):
            if moments.lower_bound(first, last) @ half_h > target:
                continue
        middle = (first + last) // 2
        intervals += [(middle + 1, last), (first, middle)]  # the left half is popped first
    return until


def first_crossing(
    loss,
    eps,
    hp,
    target,
    guess=None,
    max_steps=2.0**50,
    stride: float = BRACKET_STRIDE,
    rel_tol: float = 0.0,
    max_narrowing: int | None = None,
):
    """(first integer k, continuous estimate) with E[L_k] ≤ target, per row of a tuned ``loss``
    (:class:`~nqm.dynamics.runs.tuned_losses.TunedLoss` and its kin) at (``eps``, ``hp``); inf where never.

    A bracket [lo, hi] with L(lo) > target ≥ L(hi) is grown from ``guess`` (by ``stride``·guess, doubling) and then
    narrowed by interpolating y = log(L − L∞) linearly in k (exact for one exponential rate, so typically a step
    or two), every third probe a bisection, down to one step, or to ``rel_tol`` of k where that is more (a search
    that needs only the continuous estimate; the integer returned is then the bracket's upper end). A search may
    also stop after ``max_narrowing`` narrowing probes wherever the bracket is within 1% of k (or one step): the
    rows still wider than ``rel_tol`` (the vectorised loop would otherwise wait for its slowest row) get the
    interpolation within their bracket as their estimate. This finds a crossing of the target; it is the first
    one when E[L_k] decreases up to it (heavy ball's oscillations decay as β^k and are past by then in tuned runs;
    ``steps_to_target`` is exact in every case and checks this in the tests).
    """
    n = eps.size
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        l_inf = loss.stationary(eps, hp)
    reached = (eps < loss.stability_edge(hp)) & (l_inf < target)
    goal = np.log(np.where(reached, target - l_inf, 1.0))

    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        curve = loss.curve(eps, hp)

    def excess_log(k):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            v = curve(k)
            return v, np.log(np.maximum(v - l_inf, 1e-300)) - goal

    with np.errstate(divide="ignore", invalid="ignore"):
        v0 = np.full(n, loss.initial_loss())  # t = 0 needs no closed form
        y0 = np.log(np.maximum(v0 - l_inf, 1e-300)) - goal
    done0 = reached & (v0 <= target)
    active = reached & ~done0
    # Bracket. Without a guess: lo = 0, hi = 1, 2, 4, … . With one: probe k = ⌈guess⌉, then step away from it
    # by ``stride`` of k (at least one step), doubling the stride, until the other side of the crossing is found.
    if guess is None:
        k = np.ones(n)
    else:
        k = np.maximum(np.ceil(np.where(np.isfinite(guess), guess, 1.0)), 1.0)
    v_k, y_k = excess_log(k)
    k_below = v_k <= target
    stride = np.where(guess is None, k, np.maximum(np.ceil(stride * k), 1.0))
    lo = np.where(k_below & (guess is not None), np.maximum(k - stride, 0.0), np.where(k_below, 0.0, k))
    hi = np.where(k_below, k, k + stride)
    y_lo, y_hi = np.where(k_below, y0, y_k), np.where(k_below, y_k, y0)
    lo_ok, hi_ok = ~active | ~k_below | (lo == 0), ~active | k_below
    while True:
        need_hi = active & ~hi_ok & (hi < max_steps)
        need_lo = active & hi_ok & ~lo_ok
        if not (need_hi.any() or need_lo.any()):
            break
        v_p, y_p = excess_log(np.where(need_hi, hi, lo))
        p_below = v_p <= target
        # upward search: the probe at hi is below (bracket found) or becomes the new lo
        hi_ok |= need_hi & p_below
        up = need_hi & ~p_below
        lo, y_lo = np.where(up, hi, lo), np.where(up, y_p, y_lo)
        y_hi = np.where(need_hi & p_below, y_p, y_hi)
        hi = np.where(up, hi + stride, hi)
        # downward search: the probe at lo is above (bracket found) or becomes the new hi
        lo_ok |= need_lo & ~p_below
        down = need_lo & p_below
        hi, y_hi = np.where(down, lo, hi), np.where(down, y_p, y_hi)
        y_lo = np.where(need_lo & ~p_below, y_p, y_lo)
        lo = np.where(down, np.maximum(lo - stride, 0.0), lo)
        lo_ok |= down & (lo == 0)
        y_lo = np.where(down & (lo == 0), y0, y_lo)
        stride = np.where(up | down, 2 * stride, stride)
    reached &= done0 | hi_ok
    active = reached & ~done0
    # Narrow: the interpolated root r of y, rounded towards the side not yet pinned (floor after a step
    # that moved hi, ceil after one that moved lo), so an accurate r closes the bracket in two probes; every
    # third probe bisects, which bounds the worst case.
    moved_hi = np.zeros(n, dtype=bool)
    for i in range(10**4):
        # past max_narrowing probes, only brackets wider than 1% of k (or than one step, below 100) are narrowed
        tol = rel_tol if max_narrowing is None or i < max_narrowing else LOOSE_RTOL
        narrowing = active & (hi - lo > np.maximum(1.0, tol * hi))
        if not narrowing.any():
            break
        with np.errstate(divide="ignore", invalid="ignore"):
            r = lo + y_lo / (y_lo - y_hi) * (hi - lo)
        k = np.where(moved_hi, np.floor(r), np.ceil(r))
        if i % 3 == 2:
            k = np.floor(0.5 * (lo + hi))
        k = np.clip(np.where(np.isfinite(k), k, np.floor(0.5 * (lo + hi))), lo + 1, hi - 1)
        v_k, y_k = excess_log(np.where(narrowing, k, hi))
        below = narrowing & (v_k <= target)
        above = narrowing & ~(v_k <= target)
        hi, y_hi = np.where(below, k, hi), np.where(below, y_k, y_hi)
        lo, y_lo = np.where(above, k, lo), np.where(above, y_k, y_lo)
        moved_hi = np.where(narrowing, below, moved_hi)
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.clip(y_lo / (y_lo - y_hi), 0.0, 1.0)
    steps = np.where(done0, 0.0, np.where(reached, hi, np.inf))
    cont = np.where(done0, 0.0, np.where(reached, lo + np.where(np.isfinite(frac), frac, 1.0) * (hi - lo), np.inf))
    return steps, cont
