"""Monte Carlo at the step counts the exact solvers predict (V11 on a problem file, V13): simulated runs of the tuned
optimisers against the exact E[L] at steps k − 1 and k, a planted control (the loss 20% of the run earlier), and the
exact claim that k is the first hit, E[L_{k−1}] > target ≥ E[L_k]."""

from __future__ import annotations

import numpy as np

import nqm
from nqm import dynamics

from .one_step import stream
from .stats import Check


def predicted_steps_checks(
    p, runs, target, replicas, seed, names, *, claim_id, runs_name, described, figure, init_var=1.0, notes=()
):
    """The three checks for ``runs``, a list of (label, optimiser, batch size, predicted steps k); each run's stream
    is named by ``names`` and its label. ``runs_name`` ("tuned runs'") names them in the check, ``described`` in
    its claim."""
    predicted, measured, se, planted, crossing = [], [], [], [], []
    for label, opt, batch, k in runs:
        at = [int(0.8 * k), k - 1, k]
        exact = dynamics.expected_loss(p, opt, batch, k, at=at, init_var=init_var)
        sim = nqm.simulate(p, opt, batch, k, replicas, seed=stream(seed, *names, label), at=at, init_var=init_var)
        predicted += list(exact[1:])
        measured += list(sim.mean[1:])
        se += list(sim.sem[1:])
        planted += [exact[0], exact[0]]  # the loss 20% of the run earlier
        crossing += [target - exact[1], exact[2] - target]  # both ≤ 0: L_{k−1} > target ≥ L_k
    check = Check(
        f"{claim_id} Monte Carlo at the {runs_name} predicted steps",
        f"simulated mean loss at steps k−1 and k = exact E[L] ({described})",
        p.name,
        predicted=predicted,
        measured=measured,
        se=se,
        figure=figure,
        notes={"replicas": replicas, **dict(notes)},
    )
    control = check.control(
        f"{claim_id} control: Monte Carlo against the loss 20% earlier", "planted: E[L] at 0.8·k", planted
    )
    cross = Check(
        f"{claim_id} the predicted step is the first hit",
        "E[L_{k−1}] > target ≥ E[L_k] at each tuned run's k",
        p.name,
        predicted=np.zeros(len(crossing)),
        measured=crossing,
        se=0.0,
        exact=True,
        one_sided=True,
        figure=figure,
    )
    return [check, control, cross]
