r"""V20 — the local critical batch along a run (Merrill et al. 2025) and batch ramps against the constant batch.

On zhang2019, every run takes the greedy step on the exact second moments (:mod:`nqm.dynamics.studies.greedy`), so each
number below is exact (no sampling).

* **The local critical batch** (:func:`nqm.dynamics.local_critical_batch`): from checkpoints of the B₀ = 16 run
  at the losses L₀·0.5 … L₀·0.01, branches at B = 2^(k/4) run to the next checkpoint's loss; the local critical
  batch is the largest B up to which every branch's examples stay within 20% of the B₀ branch's. A findings table
  beside B_noise at the checkpoint, its average over the segment in full-batch-equivalent steps, and the one-step
  law τ·B_noise + (1 + τ)B₀ of :mod:`nqm.dynamics.studies.local_critical`.
* **Ramps** (:func:`nqm.dynamics.milestone_ramp` and App. D's :func:`nqm.dynamics.adaptive_batch_schedule`):
  Merrill's doubling at the measured local critical batch, the batch set to the local critical batch itself, a
  geometric ramp to the same final batch, and App. D's B = √(r·B_noise) (r = B₀²/B_noise(θ₀) and 4× that).
  **Check** (exact, an ordering): each spends fewer examples than the constant batch that reaches the target in
  as few steps (:func:`nqm.dynamics.constant_batch_at_steps`), E_ramp/E_const ≤ 1. **Control**: the doubling
  ramp reversed (the batch shrinks as the loss falls) spends more, so the same check on it is rejected.
"""

from __future__ import annotations

import numpy as np

import nqm
from nqm import dynamics, plots

from .claims import Context, Outcome
from .report import Table, save_figure
from .sizes import Sizes
from .stats import Check

ID = "V20"
TITLE = "local critical batch and batch ramps"
SECONDS = (3.1, 200)  # on one core, (quick, full): longest claims start first
SIZES = Sizes(d=(100, 1000))
NOT_ON_A_PROBLEM = "it is measured on zhang2019 (nqm.dynamics.local_critical_batch runs on any problem)"

FIGURE = "v20_batch_ramps.png"
SMALL_BATCH = 16.0
TOLERANCE = 0.2
LOSS_FRACTIONS = np.geomspace(0.5, 0.01, 9)  # of L₀: the checkpoints, and the target last


def ramps(p, local):
    """The growing ramps, by name: (batch per segment or None, run)."""
    milestones, target = local.milestones[:-1], local.milestones[-1]
    doubling = dynamics.doubling_batches(local)
    at_critical = np.maximum.accumulate(
        np.concatenate([[SMALL_BATCH], np.minimum(local.critical, local.batch_sizes.max())])
    )
    geometric = SMALL_BATCH * (doubling[-1] / SMALL_BATCH) ** (np.arange(milestones.size + 1) / milestones.size)
    out = {
        name: (batches, dynamics.milestone_ramp(p, milestones, batches, target))
        for name, batches in (
            ("doubling at the local critical batch (Merrill)", doubling),
            ("the local critical batch itself", at_critical),
            ("geometric, to the same final batch", geometric),
        )
    }
    b_noise_start = float(p.trace_h_sigma / (p.h**3).sum())  # θ₀ ~ N(0, I)
    for factor in (1, 4):
        r = factor * SMALL_BATCH**2 / b_noise_start
        out[f"App. D, B = √(r·B_noise), r = {r:.3g}"] = (None, dynamics.adaptive_batch_schedule(p, r, target))
    return out, doubling


def compute(d: int, out_dir):
    p = nqm.NoisyQuadratic.zhang2019(d)
    loss0 = 0.5 * float(p.h.sum())
    local = dynamics.local_critical_batch(p, SMALL_BATCH, loss0 * LOSS_FRACTIONS, tolerance=TOLERANCE)
    target = local.milestones[-1]
    growing, doubling = ramps(p, local)
    constant = dynamics.greedy_schedule(p, SMALL_BATCH, target=target)
    reversed_run = dynamics.milestone_ramp(p, local.milestones[:-1], doubling[::-1], target)

    def saved(run):
        match = dynamics.constant_batch_at_steps(p, run.steps, target)
        return match, run.examples / match.examples

    rows, ratios = [], []
    for name, (batches, run) in [*growing.items(), ("reversed doubling (control)", (doubling[::-1], reversed_run))]:
        match, ratio = saved(run)
        ratios.append(ratio)
        shown = "√(r·B_noise(t))" if batches is None else " → ".join(f"{b:.4g}" for b in _changes(batches))
        rows.append(
            [
                name,
                shown,
                run.steps,
                run.examples,
                match.batch_size,
                match.examples,
                1 - ratio,
                constant.steps / run.steps,
                run.examples / constant.examples,
            ]
        )
    check = Check(
        "V20 growing-batch ramps spend fewer examples than the constant batch as fast",
        "E_ramp/E_const(S_ramp) ≤ 1 for Merrill's doubling, the local critical batch, a geometric ramp and App. D",
        p.name,
        predicted=np.ones(len(growing)),
        measured=ratios[:-1],
        se=0.0,
        exact=True,
        one_sided=True,
        figure=FIGURE,
    )
    control = Check(
        "V20 control: the doubling ramp reversed",
        "planted: a batch that shrinks as the loss falls (the same ordering claimed for it)",
        p.name,
        predicted=[1.0],
        measured=ratios[-1:],
        se=0.0,
        kind="negative_control",
        exact=True,
        one_sided=True,
        figure=FIGURE,
    )
    local_table = Table(
        title=f"Merrill et al.'s local critical batch along the B₀ = {SMALL_BATCH:g} greedy run ({p.name}, τ = "
        f"{TOLERANCE:g})",
        columns=[
            "checkpoint loss/L₀",
            "step",
            "next loss/L₀",
            "local critical B",
            "B_noise at checkpoint",
            "B_noise, segment mean",
            "local/(τB_noise + (1+τ)B₀)",
            "with the segment mean",
        ],
        rows=[
            [
                local.milestones[m] / loss0,
                local.checkpoint_steps[m],
                local.milestones[m + 1] / loss0,
                local.critical[m],
                local.b_noise[m],
                local.b_noise_mean[m],
                local.critical[m] / local.one_step[m],
                local.critical[m] / local.one_step_mean[m],
            ]
            for m in range(local.critical.size)
        ],
        note="Branches at B = 2^(k/4) from each checkpoint's exact moments, greedy steps to the next loss; the "
        "local critical batch is the largest B up to which every branch's examples stay within 20% of the B₀ "
        "branch's (so it is known to a factor 2^(1/4)). It grows with B_noise, as Merrill et al. observe on "
        "language models (small at the start, rising). The one-step law (examples ∝ B + B_noise per unit loss) "
        "gives its size; the last two columns show how far the exact branches depart from it (the grid alone "
        "allows a factor 2^(1/4) ≈ 1.19).",
    )
    ramp_table = Table(
        title=f"Batch ramps against the constant batch ({p.name}, target {LOSS_FRACTIONS[-1]:g}·L₀, greedy steps)",
        columns=[
            "ramp",
            "batch sizes",
            "steps",
            "examples",
            "constant B as fast",
            "its examples",
            "examples saved",
            f"steps of B = {SMALL_BATCH:g} / steps",
            f"examples / those of B = {SMALL_BATCH:g}",
        ],
        rows=rows,
        note="'Constant B as fast': the smallest constant batch whose greedy run reaches the target in the ramp's "
        "steps (to 1e-9 in B). Every growing ramp spends fewer examples than it (the check); the reversed ramp "
        "spends more (the control). Against the small batch B₀ the ramps cut the steps many times over for a "
        "few per cent more examples, which is Merrill et al.'s batch-size warmup. Steps at equal examples are not "
        "shown: where B ≪ B_crit the frontier's examples hardly change with B, so they are ill-conditioned.",
        figure=_figure(local, growing, loss0, out_dir),
    )
    return [check, control], [local_table, ramp_table]


def _changes(batches) -> list:
    """The batch sizes where they change (a ramp's steps)."""
    b = np.asarray(batches)
    return [b[0], *b[1:][np.diff(b) != 0]]


def _figure(local, growing, loss0, out_dir) -> str:
    fig, (ax,) = plots.new_axes(1, width=6.6)
    plots.local_critical_batch(
        local.milestones[:-1] / loss0,
        local.critical,
        local.b_noise,
        local.one_step,
        {name: batches for name, (batches, _) in growing.items() if batches is not None},
        final_loss=local.milestones[-1] / loss0,
        ax=ax,
    )
    ax.set_xlabel("loss / L₀")
    return save_figure(fig, out_dir, FIGURE)


def run(ctx: Context) -> Outcome:
    """V20 with the suite's budget (the claim registry's entry, :mod:`validation.claims`)."""
    checks, tables = compute(SIZES.at(ctx.quick).d, ctx.out_dir)
    return Outcome(checks=checks, tables=tables)
