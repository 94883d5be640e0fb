r"""V18 — how the critical batch size grows as the target loss falls: derived exponents against the exact solver.

:mod:`nqm.dynamics.studies.critical_scaling` derives, for h_i = i^{−a}, c_i = h_i^q, θ₀ ~ N(0, I) and d → ∞,

.. math:: S_\text{min} \propto L^{-a/(a-1)},\quad E_\text{min} \propto L^{-\frac{a}{a-1}(1+\delta^+)-1},\quad
          B_\text{crit} \propto B_\text{noise}(\text{target}) \propto L^{-1/\alpha_B},\quad
          \alpha_B = \min\Bigl(1, \frac{a-1}{a(1-q)}\Bigr),\quad \delta = \frac{1-aq}{a},

from two exact limits: S_min (B → ∞, noise-free descent with its step tuned) and E_min (B → 0, a minimum over
continuous time). Two checks, both exact (no sampling):

* **the small-batch limit**: E(B) = B·t*(B) of the exact optimal solver tends to the continuous-time E_min at
  first order, (E(B)/E_min − 1)/(B/B_crit) → const: the quotient at B/B_crit = 2⁻¹⁴ equals the one at 2⁻¹² to
  1e-3 (the next order moves it by about 3·2⁻¹⁴·c₂/c₁ ≈ 2e-4·c₂/c₁). Control: E_min 0.01% too large, which
  moves the quotient by 0.4 and 1.6;
* **the exponents**: over three decades of target on a binned power law of 10¹³–10⁵⁰ coordinates
  (:func:`nqm.spectra.power_law_bins`; the initial loss beyond d is below 1e-9 of the smallest target), the
  local slope d log X/d log L of S_min, E_min, B_crit and B_noise(target) in the last decade is within 1% of the
  derived exponent (the slopes close their gap as L^{|1−aq|/(a−1)}: the slowest case here, a = 2 with q = ¼,
  as L^½, and every case's gap shrinks from decade to decade, which the table shows). Controls: α_B = 1 for every
  (a, q) (B_crit ∝ 1/L, what Zhang et al.'s c = h gives), and α_B = (a − 1)/a (the noise exponent ignored).

The cases include a = 1/0.79 with q = 0, the (a, q) that gives Kaplan et al. 2020's α_B = 0.21.
"""

from __future__ import annotations

import numpy as np

import nqm
from nqm import dynamics, plots

from .claims import Context, Outcome
from .report import Table, save_figure
from .stats import Check

ID = "V18"
TITLE = "B_crit against the target: derived exponents"
SECONDS = (4.4, 5.4)  # on one core, (quick, full): longest claims start first
NOT_ON_A_PROBLEM = (
    "it derives exponents for power-law families of its own (nqm.dynamics.small_batch_examples and "
    "large_batch_steps give the two limits on any problem)"
)

FIGURE = "v18_critical_scaling.png"
CASES = [(2.0, 1.0), (1.5, 1.0), (2.0, 0.0), (1.5, 0.0), (2.0, 0.25), (1 / 0.79, 0.0)]
LIMIT_RATIOS = (2.0**-12, 2.0**-14)
LIMIT_TOLERANCE = 1e-3
SLOPE_TOLERANCE = 0.01


def small_batch_limit(d: int):
    """The quotient (E(B)/E_min − 1)/(B/B_crit) at the two ratios, for SGD and SGD with P = H^−½ on zhang2019."""
    p = nqm.NoisyQuadratic.zhang2019(d)
    target = 0.01 * 0.5 * float(p.h.sum())
    rows = []
    for label, precond in (("SGD", None), ("SGD, P = H^-1/2", p.h**-0.5)):
        limit = dynamics.small_batch_examples(p, target, precond=precond)
        b_crit = limit.examples / dynamics.large_batch_steps(p, target, precond=precond)
        examples = []
        for r in LIMIT_RATIOS:
            # the run depends on c/B only: B = r·B_crit (below 1) is run as B = 1 with noise c/B
            scaled = nqm.NoisyQuadratic(p.h, p.c / (r * b_crit))
            run = dynamics.optimal_steps_to_target(scaled, target, [1.0], precond=precond)
            examples.append(r * b_crit * float(run.steps_continuous[0]))
        rows.append((label, limit.examples, b_crit, np.array(examples)))
    return p.name, target, rows


def _quotients(examples, e_min):
    return (examples / e_min - 1) / np.array(LIMIT_RATIOS)


def compute(d_limit: int, out_dir):
    name, target, limit_rows = small_batch_limit(d_limit)
    q = np.array([_quotients(ex, e_min) for _, e_min, _, ex in limit_rows])
    limit_check = Check(
        "V18 fewest examples = the B → 0 limit of the exact solver",
        "(E(B)/E_min − 1)/(B/B_crit) at B/B_crit = 2^-14 equals it at 2^-12 (first-order convergence to E_min)",
        name,
        predicted=np.ones(len(limit_rows)),
        measured=q[:, 1] / q[:, 0],
        se=0.0,
        exact=True,
        atol=LIMIT_TOLERANCE,
        figure=FIGURE,
        notes={"quotients": q.tolist(), "target": target},
    )
    planted = np.array([_quotients(ex, 1.0001 * e_min) for _, e_min, _, ex in limit_rows])
    limit_control = Check(
        "V18 control: E_min 0.01% too large",
        "planted: E_min·1.0001 (the quotient then moves by 1e-4/r)",
        name,
        predicted=np.ones(len(limit_rows)),
        measured=planted[:, 1] / planted[:, 0],
        se=0.0,
        kind="negative_control",
        exact=True,
        atol=LIMIT_TOLERANCE,
        figure=FIGURE,
    )

    scalings = [dynamics.critical_batch_scaling(a, q_) for a, q_ in CASES]
    measured, derived, wrong_one, wrong_q, rows = [], [], [], [], []
    for s in scalings:
        e = s.derived
        # the controls' B_crit exponents: −1 (α_B = 1), −a/(a − 1) (α_B = (a − 1)/a); E_min's is S_min's plus B_crit's
        planted = (-1.0, -s.exponent / (s.exponent - 1))
        for values, exponent, control in (
            (s.s_min, e.steps, [e.steps, e.steps]),
            (s.e_min, e.examples, [e.steps + c for c in planted]),
            (s.b_crit, e.critical, list(planted)),
            (s.b_noise_end, e.critical, list(planted)),
        ):
            slope = s.slopes(values, stride=2)[-1]
            measured.append(slope / abs(exponent))
            derived.append(-1.0)
            wrong_one.append(control[0] / abs(exponent))
            wrong_q.append(control[1] / abs(exponent))
        rows.append(_table_row(s))
    slope_check = Check(
        "V18 B_crit(L) ∝ L^(−1/α_B): measured slopes = derived exponents",
        "last-decade slopes of S_min, E_min, B_crit, B_noise(target) within 1% of the derived exponents",
        "power laws h = i^-a, c = h^q",
        predicted=derived,
        measured=measured,
        se=0.0,
        exact=True,
        atol=SLOPE_TOLERANCE,
        figure=FIGURE,
        notes={"cases": CASES},
    )
    controls = [
        slope_check.control(
            "V18 control: α_B = 1 for every (a, q)", "planted: B_crit ∝ 1/L, E_min ∝ L^(S_min's − 1)", wrong_one
        ),
        slope_check.control("V18 control: α_B = (a − 1)/a", "planted: the noise exponent q ignored", wrong_q),
    ]
    limit_table = Table(
        title=f"The small-batch limit of the exact solver ({name}, target {target:.4g})",
        columns=["optimiser", "E_min (continuous time)", "B_crit = E_min/S_min"]
        + [f"(E(B)/E_min − 1)/(B/B_crit) at 2^{np.log2(r):.0f}" for r in LIMIT_RATIOS],
        rows=[[label, e_min, b_crit, *_quotients(ex, e_min)] for label, e_min, b_crit, ex in limit_rows],
        note="E(B) = B·t*(B), the exact solver's continuous optimum at batch size B. The quotient is the frontier's "
        "first-order coefficient at small B: 1 for McCandlish et al.'s hyperbola, less here (the NQM's examples "
        "rise more slowly than the hyperbola's near B → 0).",
    )
    exponent_table = Table(
        title="B_crit against the target: local exponents d log X/d log L per decade, against the derived ones",
        columns=[
            "a",
            "q",
            "d",
            "α_B derived",
            "S_min: slopes (derived)",
            "E_min: slopes (derived)",
            "B_crit: slopes (derived −1/α_B)",
            "B_noise(target): slopes",
            "gap closes as L^μ, μ",
            "B_crit/B_noise(target), smallest target",
        ],
        rows=rows,
        note="Targets L₀·10^-1 … L₀·10^-4 (θ₀ ~ N(0, I)); one slope per decade, oldest first. S_min is the "
        "noise-free optimum (B → ∞), E_min the continuous-time minimum (B → 0), B_crit = E_min/S_min, and "
        "B_noise(target) = tr(HΣ)/E[GᵀHG] where the fewest-examples run ends. μ = |1 − aq|/(a − 1) is the derived "
        "rate of the leading correction. a = 1/0.79 with q = 0 is the case with Kaplan et al.'s α_B = 0.21; any "
        "q = 1 − (a − 1)/(0.21a) with 1 < a < 1.36 gives it too.",
        figure=_figure(scalings, out_dir),
    )
    return [limit_check, limit_control, slope_check, *controls], [limit_table, exponent_table]


def _table_row(s) -> list:
    e = s.derived
    a, q = s.exponent, s.noise_exponent

    def slopes(values, exponent=None):
        text = ", ".join(f"{x:.4f}" for x in s.slopes(values, stride=2))
        return text if exponent is None else f"{text} ({exponent:.4f})"

    return [
        f"{a:.4g}",
        f"{q:g}",
        f"{s.d:.2g}",
        f"{e.alpha_b:.4f}",
        slopes(s.s_min, e.steps),
        slopes(s.e_min, e.examples),
        slopes(s.b_crit, e.critical),
        slopes(s.b_noise_end),
        f"{abs(1 - a * q) / (a - 1):.3g}",
        f"{s.b_crit[-1] / s.b_noise_end[-1]:.4f}",
    ]


def _figure(scalings, out_dir) -> str:
    """B_crit(L)/B_crit(L₀/10) against L/L₀, with the derived power laws dashed."""
    fig, (ax,) = plots.new_axes(1, width=5.5)
    for s, (colour, dash) in zip(scalings, plots.LINES * 2):
        x = s.targets / s.initial_loss
        y = s.b_crit / s.b_crit[0]
        label = f"a = {s.exponent:.3g}, q = {s.noise_exponent:g}: α_B = {s.derived.alpha_b:.3g}"
        ax.plot(x, y, "o", color=colour, markersize=3)
        ax.plot(x, (x / x[0]) ** s.derived.critical, color=colour, linestyle=dash, linewidth=1, label=label)
    ax.set(xscale="log", yscale="log", xlabel="target L / L₀", ylabel="B_crit(L) / B_crit(L₀/10)")
    ax.invert_xaxis()
    ax.set_title("dots: exact E_min/S_min; lines: L^(−1/α_B), derived", fontsize=9)
    ax.legend(fontsize=6)
    return save_figure(fig, out_dir, FIGURE)


def run(ctx: Context) -> Outcome:
    """V18 with the suite's budget (the claim registry's entry, :mod:`validation.claims`)."""
    checks, tables = compute(1000, ctx.out_dir)
    return Outcome(checks=checks, tables=tables)
