"""The momentum, EMA and weight-decay tuners' search: nested golden sections over (ε, hp) on the continuous first
crossing, the fixed-step descent of short runs, the patch of crossings around the optimum, the settling on the
exact loss, the check of every earlier step and the smaller batches' runs (``optimal_tuned``); its
constants are here, in one place."""

from __future__ import annotations

import numpy as np

from ...threads import run_tasks, thread_count
from .crossing import BRACKET_STRIDE, CROSS_ELEMENTS, LOOSE_RTOL, first_crossing
from .golden import golden_min
from .optimal_runs import OptimalRuns
from .tuned_losses import DecayHeavyBallLoss, TunedLoss, decay_range

__all__ = ["optimal_tuned", "optimal_heavy_ball_decay", "cross_points"]

LR_DECADES = 1e4  # ε searched in [ε_hi/1e4, ε_hi]
GOLDEN_STEPS = 16  # λ's search and ε's search beyond its first decade
INNER_STEPS = 15  # ε's search over the decade below the feasible step: to 2.3·0.618¹⁵ = 1.7e-3 in log ε
OUTER_STEPS = 10  # h's search: to 9.2·0.618¹⁰ = 0.075 in log(1 − h), then the patch
LR_NEAR = np.log(10.0)  # the decade of ε searched first (every optimum measured sits within 0.0–1.0 of its top)
# the search's compressed spectrum (64 + 32·3·2 = 256 coordinates; the patch's is the default 448): the search only
# has to land near the optimum, the patch and the exact crossings settle it
SEARCH_SIZES = dict(exact=64, bins=32, nodes=3)
PATCH_WIDTH = 0.03
PATCH_POINTS = 5
# runs of at most this many steps are searched at fixed steps for the troughs of their ringing (ripple_descent),
# on a grid of ε in steps of RIPPLE_RESOLUTION/T in log ε over RIPPLE_WINDOW of the search's optimum
RIPPLE_STEPS = 256
RIPPLE_RESOLUTION = 0.2
RIPPLE_WINDOW = (-0.04, 0.1)
SEARCH_RTOL = 1e-4  # the searches narrow crossings to 1e-4 of t (one step where that is less) and interpolate
# ... with at most 4 narrowing probes: most rows need 2–4, and the loop would otherwise run as long as its slowest
# row (7 probes on average over the bench's 20 batch sizes)
SEARCH_NARROWING = 4
SCAN_BUDGET = 1 << 25  # coordinate-steps a final run's check of every earlier step may cost
COMPRESS_ABOVE = 2048  # coordinates beyond which the (ε, hp) search runs on a compressed spectrum


def optimal_tuned(p, target, b, loss: TunedLoss) -> OptimalRuns:
    """Fewest steps over (ε, hp) per batch size (hp = β, γ or λ, searched on the loss's ``s`` scale: log(1 − hp)
    or log λ): golden sections on s around golden sections on log ε.

    For each hp the inner search runs over ε up to ``feasible_lr`` (stable, stationary loss below target), first
    over the decade below it (15 sections; the rest of the range only where the optimum sits at that decade's low
    end); its objective is the continuous first crossing of the closed form, bracketed to 1e-4 of t (at most four
    narrowing probes where the bracket is within 1% of t) and interpolated. The outer search evaluates s's low
    end (hp → 1, where small batches put the optimum) and then 10 sections. Runs of at most 256 steps are then
    searched at fixed step counts on a fine grid of ε for the troughs of their ringing (``ripple_descent``); the
    others get a 5 × 5 patch of crossings around the optimum (``cross_patch``, a few points per call,
    ``cross_points``). Then come the check of every earlier step and the smaller batch sizes' runs
    (``reuse_smaller_batches``). Beyond 2048 coordinates the search and the descent run on a compressed spectrum
    of 256 coordinates and the patch on one of 448 (:mod:`nqm.dynamics.runs.quadrature`); their best three points per
    batch size are crossed again on the exact loss, growing the bracket a step at a time from the compressed
    crossing (``settle_exactly``).
    """

    # a long spectrum is searched compressed (a few hundred weighted coordinates), the patch on a finer compression;
    # its best points and the scan settle on the exact loss
    compress = loss.compressible and p.d > COMPRESS_ABOVE
    search = loss.compressed(**SEARCH_SIZES) if compress else loss
    fine = loss.compressed() if compress else loss

    lo, hi = (np.full(b.size, v) for v in loss.search_range())
    held = bool(np.all(lo == hi))
    seen = searched(search, target, lo, hi)
    _, s, eps, eps_hi = seen
    # t(ε, hp) is jagged where E[L] still oscillates at the target (heavy ball's top coordinates ring for ~1/(1 − β)
    # steps). Short runs (a few hundred steps, at large B) are searched at fixed steps on a fine grid of ε, which finds
    # the troughs of the ringing (``ripple_descent``); the other runs get a 5 × 5 patch of crossings around the
    # search's optimum (``cross_patch``).
    rippled, points = ripple_descent(search, target, seen[0], eps, s, lo, hi)
    best = [np.full(b.size, np.inf), np.full(b.size, np.inf), eps.copy(), s.copy(), eps_hi.copy()]
    parts = []
    if rippled.size < b.size:
        rows = np.setdiff1d(np.arange(b.size), rippled)
        fields = (seen[0][rows], eps[rows], s[rows], eps_hi[rows], lo[rows], hi[rows])
        parts.append((rows, cross_patch(loss.take(rows), fine.take(rows), target, *fields)))
    if rippled.size:
        fallback = (eps[rippled], s[rippled], eps_hi[rippled])
        parts.append((rippled, settle_exactly(loss.take(rippled), target, *points, fallback)))
    for rows, part in parts:
        for field, value in zip(best, part):
            field[rows] = value
    steps, cont, eps, s, eps_hi = best
    hp = loss.hp_of(s)
    # The bracketing search finds a crossing; every earlier step is then checked (where E[L] still oscillates at
    # the target, an earlier dip can reach it: heavy ball on d = 10⁴ at B = 1024 hits 18 steps before its crossing).
    # The closed forms' lower bounds skip most steps; a scan that would cost more than 2^25 coordinate-steps (long
    # runs of a loss without a bound, or a bound too weak to prune) keeps the crossing.
    rows = np.nonzero(np.isfinite(steps))[0]
    scans = [
        lambda i=i: loss.first_hit_by_scan(i, eps[i], hp[i], target, int(steps[i]), budget=SCAN_BUDGET) for i in rows
    ]  # on threads where the scan is compiled (it releases the GIL)
    for i, first in zip(rows, run_tasks(scans, 1 if loss.kernels() is None else thread_count(None, rows.size))):
        steps[i] = steps[i] if first is None else first
    adopted = np.nonzero(reuse_smaller_batches(loss, b, target, steps, eps, s))[0]
    if adopted.size:  # their feasible steps and continuous crossings at their own batch sizes
        hp, own = loss.hp_of(s), loss.take(adopted)
        eps_hi[adopted] = own.feasible_lr(hp[adopted], target)
        cont[adopted] = first_crossing(own, eps[adopted], hp[adopted], target, steps[adopted])[1]
    # interior: neither ε nor hp within a hair of its searched bounds
    span = hi - lo
    interior = (eps < eps_hi * (1 - 1e-3)) & (held | ((s > lo + 1e-3 * span) & (s < hi - 1e-3 * span)))
    fields = loss.result_fields(hp)
    return OptimalRuns(
        b, steps, b * steps, eps, cont, interior, **fields, family=loss.family, precond=loss.precond,
        decoupled=loss.decoupled,
    )  # fmt: skip


def searched(search: TunedLoss, target, lo, hi) -> list[np.ndarray]:
    """The nested search's best (continuous steps, s, ε, ε's upper end) per row: compiled
    (:mod:`nqm.dynamics.runs.heavy_ball_kernels`) for heavy ball where numba is installed and the environment variable
    ``NQM_COMPILED`` is not ``0``, with NumPy (:func:`nested_search`) otherwise and for the rows the compiled
    search leaves to it. Both give the same crossings up to rounding (tests/test_compiled_search.py)."""
    kernels = search.kernels()
    if kernels is None:
        return nested_search(search, target, lo, hi)
    seen, ok = kernels.search_heavy_ball(
        search.kappa, search.noise, search.v0, search.half_h, target, lo, hi,
        steps=(INNER_STEPS, GOLDEN_STEPS, LR_NEAR, LR_DECADES), outer=OUTER_STEPS,
        options=(BRACKET_STRIDE, SEARCH_RTOL, SEARCH_NARROWING, LOOSE_RTOL),
    )  # fmt: skip
    seen = list(seen)
    if not ok.all():
        rows = np.nonzero(~ok)[0]
        for field, value in zip(seen, nested_search(search.take(rows), target, lo[rows], hi[rows])):
            field[rows] = value
    return seen


def nested_search(search: TunedLoss, target, lo, hi) -> list[np.ndarray]:
    """Golden sections on s (hp = ``search.hp_of(s)``) in [lo, hi] around golden sections on log ε below the
    feasible step, vectorised over rows; returns the best (continuous steps, s, ε, ε's upper end) seen per row."""
    n = lo.size
    seen = [np.full(n, np.inf), lo.copy(), np.zeros(n), np.zeros(n)]

    def best_lr(s, guess):
        hp = search.hp_of(s)
        eps_hi = search.feasible_lr(hp, target)
        top = np.log(eps_hi)

        def crossing(z, g):
            return first_crossing(
                search, np.exp(z), hp, target, g, rel_tol=SEARCH_RTOL, max_narrowing=SEARCH_NARROWING
            )[1]

        # the optimum sits within a decade below the feasible edge in every family and problem we know of; where
        # the search ends at that decade's low end, the rest of the range is searched too
        z, t = golden_min(crossing, top - LR_NEAR, top, INNER_STEPS, guess)
        low = z < top - 0.95 * LR_NEAR
        if low.any():
            z_far, t_far = golden_min(crossing, top - np.log(LR_DECADES), top - 0.9 * LR_NEAR, GOLDEN_STEPS, t)
            take = low & (t_far < t)
            z, t = np.where(take, z_far, z), np.where(take, t_far, t)
        better = t < seen[0]
        for field, value in zip(seen, (t, s, np.exp(z), eps_hi)):
            field[better] = value[better]
        return t

    best_lr(lo, None)  # the low end itself: at small B the optimum pushes β, γ → 1 (s → lo)
    if not np.all(lo == hi):
        golden_min(best_lr, lo, hi, OUTER_STEPS, seen[0])
    return seen


def cross_patch(loss: TunedLoss, fine: TunedLoss, target, guess, eps, s, eps_hi, lo, hi):
    """The best of a 5 × 5 patch of crossings around each row's (ε, s), as (steps, continuous steps, ε, s, ε's upper
    end); ``fine`` is the loss the patch is crossed on (``loss`` itself, or a compressed one whose best three points
    per row are then crossed on ``loss``), ``guess`` the search's crossing.

    Where E[L] still oscillates at the target the crossing jumps with (ε, hp): on Zhang's problem binned at B = 64
    the loss at the crossing oscillates by 0.2% of the target over 1.4% of ε, which moves the crossing by up to
    0.4%; the patch picks the best nearby."""
    n = eps.size
    offsets = np.linspace(-PATCH_WIDTH, PATCH_WIDTH, PATCH_POINTS)
    k = offsets.size
    s_c = np.clip(s + offsets[:, None], lo, hi)  # (k, n): the patch's rows of s ...
    cap = fine.tiled(k).feasible_lr(fine.hp_of(s_c).ravel(), target).reshape(k, n)
    eps_c = np.minimum(eps * np.exp(offsets)[:, None], cap[:, None])  # ... and (k, k, n) of ε under each
    s_c, cap = (np.broadcast_to(x[:, None], eps_c.shape) for x in (s_c, cap))
    # compressed, only the continuous crossing ranks the patch; else the integer crossing is final. The points are
    # crossed several at a time, from the search's crossing
    tol = SEARCH_RTOL if fine is not loss else 0.0
    crossed = cross_points(fine, eps_c, fine.hp_of(s_c), target, np.broadcast_to(guess, eps_c.shape), rel_tol=tol)
    patch = [x.reshape(k * k, n) for x in (*crossed, eps_c, s_c, cap)]
    if fine is loss:
        return soonest_of(patch, (eps, s, eps_hi))
    ranks = np.argsort(patch[1], axis=0)[:3]
    return settle_exactly(loss, target, *(patch[i][ranks, np.arange(n)] for i in (1, 2, 3, 4)), (eps, s, eps_hi))


def settle_exactly(loss: TunedLoss, target, guess, eps, s, cap, fallback):
    """The best of k points per row (``guess``, ``eps``, ``s``, ``cap``: (k, n), found on ``loss`` or on a compressed
    copy of it) crossed on ``loss`` from ``guess``, a step at a time: (steps, continuous steps, ε, s, ε's upper end)."""
    hp = loss.hp_of(s)
    # a compressed stationary loss is not the exact one: where the exact one is not below the target, ε is capped
    # at the exact loss's feasible step
    exact = loss.tiled(eps.shape[0])
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        infeasible = ~(exact.stationary(eps.ravel(), hp.ravel()) < target).reshape(cap.shape)
    if infeasible.any():
        cap = np.where(infeasible, exact.feasible_lr(hp.ravel(), target).reshape(cap.shape), cap)
        eps = np.minimum(eps, cap)
    # a compressed crossing is within a few hundredths of a step of the exact one on smooth runs: the bracket is
    # grown from it a step at a time
    crossed = cross_points(loss, eps, hp, target, guess, stride=1e-9)
    return soonest_of([*crossed, eps, s, cap], fallback)


def ripple_descent(loss: TunedLoss, target, crossing, eps, s, lo, hi):
    """Fewer steps for short runs, from a grid of (ε, s) at fixed step counts: the rows improved, and per row the
    three best grid points as (k = 3, rows) arrays (steps, ε, s, ε's upper end) to be crossed exactly.

    In a run of T steps whose top coordinates still ring at the target, E[L_T] ripples in ε: on Zhang's problem
    binned at B = 2¹⁸ and T = 152 it has 28 local minima between ε = 3.7 and 4.3 (at β = 0.9595), about 0.6% of ε
    apart, whose depths differ by more than 25×, so a search along the crossing lands in a trough but rarely in the
    deepest (the tuned run there took 158 steps where 152 suffice). For each run of at most ``RIPPLE_STEPS``
    steps (T = the search's crossing, rounded up), ε is laid out from −4% to +10% of the search's optimum in steps
    of 0.2/T in log ε (about four per ripple, whose period in log ε falls like 1/T as the phases tφ do), at s and
    s ± 0.03; the smallest t < T at which some grid point has E[L_t] ≤ target is then found by galloping down and
    bisecting (:func:`fixed_step_descent`)."""
    rows = np.nonzero(crossing <= RIPPLE_STEPS)[0]
    kernels = loss.kernels()

    def descend(i):
        """Row i's best three grid points at the first step found (t, ε, s, ε's upper end), or None."""
        start = int(np.ceil(crossing[i]))
        step = RIPPLE_RESOLUTION / start
        z = np.arange(np.floor(RIPPLE_WINDOW[0] / step), np.ceil(RIPPLE_WINDOW[1] / step) + 1) * step
        s_row = np.unique(np.clip(s[i] + np.array([-PATCH_WIDTH, 0.0, PATCH_WIDTH]), lo[i], hi[i]))
        cap_row = loss.take(np.full(s_row.size, i)).feasible_lr(loss.hp_of(s_row), target)
        eps_g, s_g, cap_g = np.broadcast_arrays(eps[i] * np.exp(z)[None, :], s_row[:, None], cap_row[:, None])
        keep = eps_g <= cap_g
        # never empty: at the search's own s the window starts 4% below its ε, which is under that s's cap
        eps_g, s_g, cap_g = eps_g[keep], s_g[keep], cap_g[keep]
        if kernels is None:
            values = grid_values(loss.take(np.full(eps_g.size, i)).curve(eps_g, loss.hp_of(s_g)), eps_g.size)
            t = fixed_step_descent(lambda t: values(t).min() <= target, start)
        else:  # compiled: a step reaches the target as soon as one point does
            values = kernels.fixed_step_curve(eps_g, loss.hp_of(s_g), loss.kappa, loss.noise[i], loss.v0, loss.half_h)
            t = fixed_step_descent(lambda t: values.reaches(t, target), start)
        if t is None:
            return None
        top = np.resize(np.argsort(values(t), kind="stable")[:3], 3)
        return np.full(3, float(t)), eps_g[top], s_g[top], cap_g[top]

    # rows are independent: the compiled descents (which release the GIL) run on threads, one row each
    threads = 1 if kernels is None else thread_count(None, rows.size)
    found = run_tasks([lambda i=i: descend(i) for i in rows], threads)
    improved = [i for i, point in zip(rows, found) if point is not None]
    points = [point for point in found if point is not None]
    return np.array(improved, dtype=int), [np.stack(x, axis=1) for x in zip(*points)] if points else []


def fixed_step_descent(reaches, start: int) -> int | None:
    """The smallest t < ``start`` found with ``reaches(t)`` (some grid point has E[L_t] ≤ target), galloping down
    from start − 1 (steps 1, 2, 4, …) and then bisecting; None where start − 1 does not reach."""
    good = start - 1
    if good < 1 or not reaches(good):
        return None
    bad, stride = 0, 1
    while good - stride > 0:
        if not reaches(good - stride):
            bad = good - stride
            break
        good, stride = good - stride, 2 * stride
    while good - bad > 1:
        mid = (good + bad) // 2
        good, bad = (mid, bad) if reaches(mid) else (good, mid)
    return good


def grid_values(curve, n: int):
    """t ↦ E[L_t] at the ``n`` points of ``curve`` (NaN as inf), the last step's values kept for the caller."""
    last = {}

    def values(t):
        if t not in last:
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                v = curve(np.full(n, float(t)))
            last.clear()
            last[t] = np.where(np.isnan(v), np.inf, v)
        return last[t]

    return values


def reuse_smaller_batches(loss: TunedLoss, b, target, steps, eps, s) -> np.ndarray:
    """Where the next smaller batch size's tuned run reaches the target in fewer steps, run its (ε, s) at this batch
    size too, if that is faster: ``steps``, ``eps`` and ``s`` are updated in place, in order of B (so a run can pass
    up several batch sizes), and the rows that took a smaller batch's run are returned.

    A larger batch only injects less noise: E[L_t] is a part without noise plus q/B times a part that is not
    negative (the closed forms' S_t and its kin), so at the same hyper-parameters its loss is no larger at any step
    and it reaches the target no later. The tuned steps should therefore not grow with B; where the search missed
    that (short runs at large B, where t(ε, hp) is most jagged), the smaller batch's run is checked at this batch
    size step by step (:meth:`TunedLoss.first_hit_by_scan`, up to the smaller batch's steps) and taken where it hits
    sooner. A check over the scan's budget is skipped."""
    adopted = np.zeros(b.size, dtype=bool)
    order = np.argsort(b, kind="stable")
    for smaller, i in zip(order, order[1:]):
        if not steps[smaller] < steps[i]:
            continue
        hp = loss.hp_of(s[smaller])
        first = loss.first_hit_by_scan(i, eps[smaller], hp, target, int(steps[smaller]) + 1, budget=SCAN_BUDGET)
        if first is not None and first < steps[i]:
            steps[i], eps[i], s[i], adopted[i] = first, eps[smaller], s[smaller], True
    return adopted


def cross_points(loss: TunedLoss, eps, hp, target, guess, **options):
    """:func:`first_crossing` of k points per batch size (``eps``, ``hp``, ``guess`` of shape (..., n)), several
    points to a call (on the loss ``tiled`` as many times) but at most ``CROSS_ELEMENTS`` rows × coordinates (at least
    one point): enough to share the calls' fixed costs, few enough that a call does not evaluate many finished
    rows while its slowest one narrows. Rows are independent, so the grouping changes no integer crossing.
    Returns (steps, continuous steps) shaped like ``eps``."""
    kernels = loss.kernels()
    if kernels is not None:
        return cross_points_compiled(kernels, loss, eps, hp, target, guess, **options)
    shape, n = eps.shape, eps.shape[-1]
    eps, hp, guess = (np.reshape(x, (-1, n)) for x in (eps, hp, guess))
    per_call = max(1, CROSS_ELEMENTS // (n * loss.v0.size))
    parts = []
    for first in range(0, eps.shape[0], per_call):
        group = slice(first, first + per_call)
        size = eps[group].shape[0]
        crossed = first_crossing(
            loss.tiled(size), eps[group].ravel(), hp[group].ravel(), target, guess[group].ravel(), **options
        )
        parts.append([x.reshape(size, n) for x in crossed])
    return tuple(np.concatenate(field).reshape(shape) for field in zip(*parts))


def cross_points_compiled(
    kernels, loss: TunedLoss, eps, hp, target, guess, stride=BRACKET_STRIDE, rel_tol=0.0, max_narrowing=None
):
    """:func:`cross_points` by :func:`nqm.dynamics.runs.heavy_ball_kernels.cross_points`, point by point; points it
    leaves (a value that is not a number) are crossed with :func:`first_crossing`."""
    shape, n = eps.shape, eps.shape[-1]
    which = np.broadcast_to(np.arange(n), shape).ravel()
    eps, hp, guess = (np.broadcast_to(x, shape).ravel() for x in (eps, hp, guess))
    narrowing = np.iinfo(np.int64).max if max_narrowing is None else max_narrowing
    steps, cont, ok = kernels.cross_points(
        eps, hp, which, guess, loss.kappa, loss.noise, loss.v0, loss.half_h, target,
        options=(stride, rel_tol, narrowing, LOOSE_RTOL),
    )  # fmt: skip
    if not ok.all():
        left = ~ok
        steps[left], cont[left] = first_crossing(
            loss.take(which[left]), eps[left], hp[left], target, guess[left], stride=stride, rel_tol=rel_tol,
            max_narrowing=max_narrowing,
        )  # fmt: skip
    return steps.reshape(shape), cont.reshape(shape)


def soonest_of(points, fallback):
    """Per column, the first of the rows of ``points`` = [steps, continuous steps, …] (each (k, n)) that reaches the
    target soonest (:func:`sooner`); rows that never reach it leave the ``fallback`` fields (ε, s, ε's upper end)."""
    n = points[0].shape[1]
    best = (np.full(n, np.inf), np.full(n, np.inf), *fallback)
    for point in zip(*points):
        best = sooner(point, best)
    return best


def sooner(point, best):
    """Per row, ``point`` = (steps, continuous steps, …) where it reaches the target sooner than ``best`` (fewer
    steps, then the earlier continuous crossing), else ``best``."""
    better = (point[0] < best[0]) | ((point[0] == best[0]) & (point[1] < best[1]))
    return tuple(np.where(better, new, old) for new, old in zip(point, best))


def optimal_heavy_ball_decay(p, target, b, init_var, precond, decoupled: bool) -> OptimalRuns:
    """Heavy ball with its weight decay λ tuned too: golden sections on log λ over :func:`decay_range`, one λ per
    batch size, around the held-λ search of (ε, β) (:class:`DecayHeavyBallLoss`, :func:`optimal_tuned`) whose
    continuous first crossing is the objective: 18 held-λ searches. ``interior`` is also False where λ sits at an
    end of its range."""
    lo, hi = (np.full(b.size, v) for v in decay_range(p))

    def held(log_lam):
        return optimal_tuned(p, target, b, DecayHeavyBallLoss(p, b, init_var, precond, np.exp(log_lam), decoupled))

    u = golden_min(lambda u, _guess: held(u).steps_continuous, lo, hi, GOLDEN_STEPS)[0]
    runs = held(u)
    span = hi - lo
    runs.interior &= (u > lo + 1e-3 * span) & (u < hi - 1e-3 * span)
    return runs
