"""How Monte Carlo is held against theory (docs/architecture.md, "How a claim is checked").

A check compares measured values (with standard errors) to predictions cell by cell. A cell passes when

.. math:: |m - p| \\le z\\,\\mathrm{SE} + \\mathrm{tol}\\,|p|,

with one critical ``z`` for the whole suite: Bonferroni over the K statistical cells of all positive
checks, ``z = Φ⁻¹(1 − α/(2K))`` with ``α = 1e-3``. A check passes when all its cells pass. A negative
control compares the same measurements with a planted wrong prediction; it is *rejected* (as it must be)
when at least one cell fails at the same ``z``. Exact checks (se = 0) use only the float tolerance.

A cell that is the mean of n skewed samples (a loss over replicas) carries the skewness of that mean,
``γ̂/√n``: its Studentized ``z`` then has a heavy tail on the side opposite the skew (the sample mean and the
sample SD move together), and the cell is decided on Hall's monotone correction of it (:func:`skew_corrected`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import optimize, stats

from nqm.montecarlo import sample_skewness

ALPHA_SUITE = 1e-3
FLOAT_RTOL = 1e-9  # float64 state; the simulated losses carry no systematic error larger than this


@dataclass
class Check:
    """One claim held against measurements; ``kind`` is "check" or "negative_control"."""

    name: str
    claim: str
    family: str
    predicted: np.ndarray
    measured: np.ndarray
    se: np.ndarray
    kind: str = "check"
    exact: bool = False
    one_sided: bool = False  # measured ≤ predicted is the claim (a bound)
    atol: float = 0.0  # absolute float tolerance, for exact checks whose prediction is 0
    figure: str | None = None
    notes: dict = field(default_factory=dict)
    reference: np.ndarray | None = None  # a control's: the check's own (right) prediction
    # the sampling skewness of each measured mean, γ̂/√n (mean_skewness); None: the cells are decided on z as is
    mean_skew: np.ndarray | None = None
    # filled in by `decide`
    z_crit: float = float("nan")
    z: np.ndarray | None = None
    z_uncorrected: np.ndarray | None = None  # (m − p)/SE where mean_skew corrected it, else None
    passed: bool | None = None

    def __post_init__(self):
        self.predicted = np.atleast_1d(np.asarray(self.predicted, dtype=np.float64))
        self.measured = np.atleast_1d(np.asarray(self.measured, dtype=np.float64))
        self.se = np.broadcast_to(np.atleast_1d(np.asarray(self.se, dtype=np.float64)), self.measured.shape)
        if self.mean_skew is not None:
            skew = np.atleast_1d(np.asarray(self.mean_skew, dtype=np.float64))
            self.mean_skew = np.broadcast_to(np.where(np.isfinite(skew), skew, 0.0), self.measured.shape)

    @property
    def cells(self) -> int:
        return self.measured.size

    def control(self, name: str, claim: str, predicted) -> Check:
        """The same measurements against a planted wrong prediction."""
        return Check(
            name=name,
            claim=claim,
            family=self.family,
            predicted=predicted,
            measured=self.measured,
            se=self.se,
            kind="negative_control",
            exact=self.exact,
            one_sided=self.one_sided,
            atol=self.atol,
            figure=self.figure,
            reference=self.predicted,
            mean_skew=self.mean_skew,
        )


def critical_z(cells: int, alpha: float = ALPHA_SUITE) -> float:
    """Two-sided Bonferroni critical value for ``cells`` comparisons at suite-wide level ``alpha``."""
    return float(stats.norm.isf(alpha / (2 * max(cells, 1))))


def mean_skewness(samples, axis: int = 0) -> np.ndarray:
    r"""The skewness of the sampling distribution of the mean of ``samples`` along ``axis``: ``γ̂/√n``, with
    ``γ̂ = m₃/m₂^{3/2}`` the samples' skewness from their central moments (0 where they do not vary)."""
    return sample_skewness(samples, axis) / np.sqrt(np.shape(samples)[axis])


def skew_corrected(z, mean_skew):
    r"""Hall's (1992) monotone skewness correction of a Studentized mean,

    .. math:: T = z + a\,(z^2 + \tfrac12) + \tfrac13 a^2 z^3,\qquad a = \tfrac13\,\hat\gamma/\sqrt n,

    where ``mean_skew`` is ``γ̂/√n`` (:func:`mean_skewness`). To first order in ``1/√n`` it is Johnson's (1978)
    ``z + γ̂(1 + 2z²)/(6√n)``, which removes the O(1/√n) term of the Studentized mean's Edgeworth expansion, so T is
    closer to N(0, 1) than z; the cubic term makes it increasing in z (dT/dz = (1 + az)² ≥ 0), so a larger error
    never looks smaller. Hall, "On the removal of skewness by transformation", JRSS B 54 (1992) 221–228.
    """
    z, a = np.asarray(z, dtype=np.float64), np.asarray(mean_skew, dtype=np.float64) / 3.0
    with np.errstate(invalid="ignore"):  # an infinite z (a diverged cell) stays infinite
        return np.where(np.isfinite(z), z + a * (z**2 + 0.5) + a**2 * z**3 / 3.0, z)


def decide(checks: list[Check], alpha: float = ALPHA_SUITE) -> float:
    """Fix every check's verdict with the suite-wide critical z; return that z.

    A statistical cell passes when ``|m − p| ≤ z·SE + tol·|p|``; where the check gives its means' skewness, when
    :func:`skew_corrected` of ``(|m − p| − tol·|p|)/SE`` (with m − p's sign) is within z instead.
    """
    k = sum(c.cells for c in checks if c.kind == "check" and not c.exact)
    z_crit = critical_z(k, alpha)
    for c in checks:
        diff = c.measured - c.predicted
        slack = FLOAT_RTOL * np.abs(c.predicted) + c.atol
        bound = (0.0 if c.exact else z_crit) * c.se + slack
        ok = diff <= bound if c.one_sided else np.abs(diff) <= bound
        with np.errstate(divide="ignore", invalid="ignore"):
            # Exact cells have no SE: z is 0 within the float tolerance and infinite outside it.
            c.z = np.where(c.se > 0, diff / c.se, np.where(ok, 0.0, np.inf))
            if c.mean_skew is not None and not c.exact:
                # the float tolerance comes off |m − p| before the correction, as it widens the bound above
                inside = np.sign(diff) * np.maximum(np.abs(diff) - slack, 0.0) / c.se
                c.z_uncorrected, c.z = c.z, np.where(c.se > 0, skew_corrected(inside, c.mean_skew), c.z)
                ok = np.where(c.se > 0, c.z <= z_crit if c.one_sided else np.abs(c.z) <= z_crit, ok)
        c.z_crit = z_crit
        all_ok = bool(np.all(ok))
        c.passed = all_ok if c.kind == "check" else not all_ok
    return z_crit


def without_power(c: Check, z_crit: float) -> bool:
    """Whether a negative control's planted error moves no cell's prediction by more than 2·(z·SE + tolerance): a
    check that passes leaves the measurement within z·SE of the truth, so only a larger move is sure to be
    rejected. On a user's problem (``nqm validate --problem``) such a control is set aside and named (a planted
    (1 − εh) for (1 − εh)² is invisible where every εh is 1, a planted noise 2× where there is no noise); the suite's
    own families are chosen so that every control has power."""
    if c.kind != "negative_control" or c.reference is None:
        return False
    slack = FLOAT_RTOL * np.abs(c.reference) + c.atol
    return bool(np.all(np.abs(c.predicted - c.reference) <= 2.0 * ((0.0 if c.exact else z_crit) * c.se + slack)))


def worst_cell(c: Check) -> int:
    """Index of the cell with the largest |z| (the one the report shows)."""
    return int(np.argmax(np.abs(np.nan_to_num(c.z, nan=np.inf))))


# -- estimates with standard errors ---------------------------------------------------------------
def ratio_to_mean(numerator: float, samples) -> tuple[float, float]:
    """``numerator / mean(samples)`` and its delta-method SE, ``numerator·SE(mean)/mean²`` — a ratio-of-
    expectations noise scale such as tr Σ/E|G|² from simulated |G|²."""
    samples = np.asarray(samples, dtype=np.float64)
    m = samples.mean()
    return float(numerator / m), float(numerator * samples.std(ddof=1) / np.sqrt(samples.size) / m**2)


def ratio_of_means(numerator, denominator) -> tuple[float, float]:
    """``mean(a)/mean(b)`` over paired samples and its delta-method SE, ``sd(a − R·b)/(√n·mean(b))``."""
    a, b = (np.asarray(x, dtype=np.float64) for x in (numerator, denominator))
    r = a.mean() / b.mean()
    return float(r), float((a - r * b).std(ddof=1) / np.sqrt(a.size) / abs(b.mean()))


def parabola_vertex(eps, mean, se):
    """Weighted least-squares fit ``ΔL = b₁ε + b₂ε²`` (ΔL(0) = 0 exactly) and its maximum.

    Returns ``(ε*, SE(ε*), ΔL*, SE(ΔL*))`` with ``ε* = −b₁/(2b₂)``, ``ΔL* = −b₁²/(4b₂)``, standard errors
    by the delta method from the fit covariance ``(XᵀWX)⁻¹`` (weights 1/SE², independent cells).
    """
    eps, mean, se = (np.asarray(a, dtype=np.float64) for a in (eps, mean, se))
    x = np.stack([eps, eps**2], axis=1) / se[:, None]
    y = mean / se
    cov = np.linalg.inv(x.T @ x)
    b1, b2 = cov @ (x.T @ y)
    e_star = -b1 / (2 * b2)
    d_eps = np.array([-1 / (2 * b2), b1 / (2 * b2**2)])
    l_star = -(b1**2) / (4 * b2)
    d_loss = np.array([-b1 / (2 * b2), b1**2 / (4 * b2**2)])
    return e_star, float(np.sqrt(d_eps @ cov @ d_eps)), l_star, float(np.sqrt(d_loss @ cov @ d_loss))


def fit_saturation(batch_sizes, values, se, guess_scale: float, guess_noise: float):
    """Weighted fit of ``y(B) = y_max/(1 + B_noise/B)``; returns (y_max, B_noise, their SEs).

    The functional form is the one of McCandlish et al. eqs. 2.6–2.7; ``B_noise`` is fitted in log
    space so it stays positive; its SE comes back to linear scale by the delta method.
    """
    b = np.asarray(batch_sizes, dtype=np.float64)

    def model(bb, y_max, log_noise):
        return y_max / (1 + np.exp(log_noise) / bb)

    popt, pcov = optimize.curve_fit(
        model, b, values, p0=[guess_scale, np.log(guess_noise)], sigma=se, absolute_sigma=True, maxfev=10_000
    )
    y_max, log_noise = popt
    noise = float(np.exp(log_noise))
    return float(y_max), noise, float(np.sqrt(pcov[0, 0])), noise * float(np.sqrt(pcov[1, 1]))
