r"""V22 — a finite training set: minibatches without replacement, shuffled epochs, training against population loss.

N examples of zhang2019 are drawn once (:class:`nqm.FiniteDataset`); the training loss is their mean, whose
minimiser θ_N is not the population's θ* = 0.

* **Check** (Monte Carlo, one step): the noise of a batch of B distinct examples about the training gradient, in
  the metric that enters the one-step law, ``E[(g_B − g_N)ᵀH(g_B − g_N)] = tr(HΣ_N)·(N − B)/(B(N − 1))`` at
  B = 1, N/4, N/2, N − 1 (simulated) and N (exactly 0). Control: ``tr(HΣ_N)/B``, the independent examples' law.
* **Check** (Monte Carlo, whole runs): the training and population losses of SGD and heavy ball when every step
  draws its B examples afresh (independent batches, exact with the factor above, :meth:`FiniteDataset.expected_losses`).
  Control: the with-replacement law Σ_N/B.
* **Check** (Monte Carlo): least squares on N = 64 drawn (x, y) pairs, whose per-example noise depends on θ: the
  exact recursion of the mean and the dense second moment (:class:`nqm.FiniteLeastSquares`) against simulated
  training and population losses. Control: the with-replacement law.
* **Findings**: shuffled epochs (each example once per epoch, as training does) against independent batches and
  with replacement, after 1, 4 and 16 epochs; the population loss against the training loss as N grows; and the
  batch size that minimises the population loss after a fixed number of epochs, against ε and N, beside Smith &
  Le's B_opt ∝ εN; least squares' training-set noise scale against the population's along a run.
"""

from __future__ import annotations

import numpy as np

import nqm
from nqm import optim

from .claims import Context, Outcome
from .report import Table
from .sizes import Sizes
from .stats import Check

ID = "V22"
TITLE = "a finite training set: without replacement, epochs, train vs test"
SECONDS = (18, 100)  # on one core, (quick, full): longest claims start first
SIZES = Sizes(d=(20, 50), examples=(256, 256), replicas=(4000, 12_000))
NOT_ON_A_PROBLEM = "it draws its own training set from zhang2019"

LR = 0.5  # × 1/h_max
EPOCHS = (1, 4, 16)
SMITH_LE_EPOCHS = 4


def compute(d: int, n: int, replicas: int, seed: int):
    p = nqm.NoisyQuadratic.zhang2019(d)
    data = nqm.FiniteDataset.draw(p, n, seed=[seed, 22])
    rng = np.random.default_rng([seed, 22, 1])
    checks = _one_step_checks(data, replicas, rng)
    checks += _run_checks(data, replicas // 4, seed)
    squares = nqm.FiniteLeastSquares.draw(1.0 / np.arange(1, 9), 64, 0.5, seed=[seed, 22, 6])
    checks += _least_squares_checks(squares, replicas, seed)
    tables = [
        _epochs_table(data, replicas // 8, seed),
        _generalisation_table(p, seed),
        _smith_le_table(p, seed, d),
        _least_squares_table(squares),
        _least_squares_sizes_table(seed),
        _epochs_to_target_table(data),
    ]
    return checks, tables


def _one_step_checks(data, replicas: int, rng):
    n, trace = data.n, float(np.trace(data.h[:, None] * data.sigma))
    batches = [1, n // 4, n // 2, n - 1, n]
    measured, se = [], []
    block = max(1, (1 << 22) // (n * data.d))  # draws per block: the gathered examples stay within 32 MiB
    for b in batches:
        s = np.empty(replicas)
        for r0 in range(0, replicas, block):
            rows = min(block, replicas - r0)
            picks = np.argsort(rng.random((rows, n)), axis=1)[:, :b]  # B distinct examples per draw
            dev = data.examples[picks].mean(axis=1) - data.mean_noise
            s[r0 : r0 + rows] = np.square(dev) @ data.h
        measured.append(s.mean())
        se.append(s.std(ddof=1) / np.sqrt(replicas) if b < n else 0.0)
    predicted = [trace * (n - b) / (b * (n - 1)) for b in batches]
    check = Check(
        "V22 a batch of B distinct examples has noise Σ_N(N − B)/(B(N − 1))",
        f"E[(g_B − g_N)ᵀH(g_B − g_N)] at B = {', '.join(map(str, batches))} of N = {n} (0 at B = N, to the "
        "rounding of a mean taken in another order)",
        data.name,
        predicted=predicted,
        measured=measured,
        se=se,
        atol=1e-24 * trace,
    )
    control = check.control("V22 control: independent examples", "planted: tr(HΣ_N)/B", [trace / b for b in batches])
    return [check, control]


def _run_checks(data, replicas: int, seed: int):
    lr = LR / float(data.h.max())
    at = [1, 10, 50, 200, 600]
    measured, se, exact, planted = [], [], [], []
    for k, (opt, b) in enumerate(((optim.sgd(lr), data.n // 4), (optim.heavy_ball(0.4 * lr, 0.6), data.n // 2))):
        run = data.simulate(opt, b, at[-1], replicas, sampling="batches", seed=[seed, 22, 2, k], at=at)
        right = data.expected_losses(opt, b, at[-1], sampling="batches", at=at)
        wrong = data.expected_losses(opt, b, at[-1], sampling="replacement", at=at)
        for simulated, e, w in zip(run, right, wrong):
            measured.append(simulated.mean)
            se.append(simulated.sem)
            exact.append(e.mean)
            planted.append(w.mean)
    check = Check(
        "V22 training and population losses with independent batches are exact",
        f"SGD at B = N/4 and heavy ball at B = N/2 (N = {data.n}), both losses at steps {', '.join(map(str, at))}",
        data.name,
        predicted=np.concatenate(exact),
        measured=np.concatenate(measured),
        se=np.concatenate(se),
    )
    control = check.control("V22 control: with replacement", "planted: the Σ_N/B law's curves", np.concatenate(planted))
    return [check, control]


def _least_squares_checks(data, replicas: int, seed: int):
    at = [2, 5, 20, 100, 300]
    run = data.simulate(optim.sgd(0.5), 8, at[-1], replicas, sampling="batches", seed=[seed, 22, 7], at=at)
    exact = [c.mean[at] for c in data.expected_losses(0.5, 8, at[-1], sampling="batches")]
    planted = [c.mean[at] for c in data.expected_losses(0.5, 8, at[-1], sampling="replacement")]
    check = Check(
        "V22 least squares on N examples: the exact moment recursion",
        f"SGD ε = 0.5, B = 8 distinct of N = {data.n} pairs, training and population losses at steps "
        f"{', '.join(map(str, at))} (the per-example noise depends on θ: mean and dense second moment)",
        data.name,
        predicted=np.concatenate(exact),
        measured=np.concatenate([r.mean for r in run]),
        se=np.concatenate([r.sem for r in run]),
    )
    control = check.control(
        "V22 control: least squares with replacement", "planted: the Σ_N/B law's moments", np.concatenate(planted)
    )
    return [check, control]


def _least_squares_sizes_table(seed: int) -> Table:
    """Training and population losses of least squares at the end of a run, as N and B vary (exact)."""
    h, steps, lr, rows = 1.0 / np.arange(1, 9), 400, 0.2, []
    for n in (16, 64, 256):
        data = nqm.FiniteLeastSquares.draw(h, n, 0.5, seed=[seed, 22, 8, n])
        for b in sorted({4, n // 4, n}):
            means, seconds = data.moments(lr, b, steps)
            b_train, b_population = data.noise_scales(means[-1:], seconds[-1:])
            train, population = data.expected_losses(lr, b, steps)
            scales = [b_train[0], b_population[0]] if b < n else ["— (θ_t → θ_N: 0/0)", b_population[0]]
            rows.append([n, b, train.mean[-1], population.mean[-1], population.mean[-1] - train.mean[-1], *scales])
    return Table(
        title=f"Least squares on N pairs: the losses after {steps} steps as N and B vary (d = 8, σ² = 0.5, "
        f"SGD ε = {lr:g})",
        columns=[
            "N",
            "B",
            "training loss",
            "population loss",
            "gap",
            "B_noise of the training set",
            "B_noise of the population",
        ],  # fmt: skip
        rows=rows,
        note="Exact (FiniteLeastSquares, independent batches). At B = N the run is gradient descent on the "
        "training loss: it reaches θ_N, where the training set's gradients have no spread about their mean but "
        "the population's do. Small N fits its examples and pays in the gap; small B adds noise to both.",
    )


def _epochs_to_target_table(data) -> Table:
    """Fewest epochs to a training target with ε tuned per B (exact), B distinct examples against replacement."""
    target = 0.02 * 0.5 * float(data.h.sum())
    batches = np.array([1, 4, 16, 64, data.n // 2, 3 * data.n // 4, data.n - 1, data.n])
    distinct = data.optimal_epochs(target, batches)
    replaced = data.optimal_epochs(target, batches, sampling="replacement")
    rows = [
        [b, distinct.lr[i], distinct.steps[i], distinct.examples[i] / data.n, replaced.steps[i],
         replaced.examples[i] / data.n]
        for i, b in enumerate(batches)
    ]  # fmt: skip
    return Table(
        title=f"Fewest epochs to a training loss of {target:.3g} with ε tuned ({data.name}, independent batches)",
        columns=["B", "ε*", "steps, B distinct", "epochs", "steps, with replacement", "epochs"],
        rows=rows,
        note="Exact (FiniteDataset.optimal_epochs: each B's training problem carries its batch factor). Without "
        "replacement the noise falls to 0 as B → N, so the epochs settle at full-batch descent's; with "
        "replacement a batch of N still repeats examples and keeps noise Σ_N/N.",
    )


def _least_squares_table(data) -> Table:
    steps = 600
    means, seconds = data.moments(0.5, 8, steps)
    train, population = data.expected_losses(0.5, 8, steps)
    at = np.array([0, 10, 30, 100, 300, 600])
    b_train, b_population = data.noise_scales(means[at], seconds[at])
    rows = [[t, train.mean[t], population.mean[t], bt, bp, bt / bp] for t, bt, bp in zip(at, b_train, b_population)]
    return Table(
        title=f"Least squares on N = {data.n} pairs: the training set's noise scale against the population's "
        f"(SGD ε = 0.5, B = 8, exact)",
        columns=[
            "step",
            "training loss",
            "population loss",
            "B_noise of the training set",
            "B_noise of the population",
            "ratio",
        ],  # fmt: skip
        rows=rows,
        note="Ratios of expectations along the exact run (FiniteLeastSquares.noise_scales): the training set's "
        "E[tr(H_N S_N(θ))]/E[ḡᵀH_Nḡ], with S_N the per-example gradients' covariance about the training gradient "
        "ḡ and H_N = XᵀX/N, against the population's E[tr(HΣ(θ))]/E[GᵀHG]. Early on both are set by the "
        "gradient; near the minimum the training set's residuals are those of θ_N, fitted to these examples.",
    )


def _epochs_table(data, replicas: int, seed: int) -> Table:
    lr = LR / float(data.h.max())
    rows = []
    for b in (4, 16, 64):
        per_epoch = data.n // b
        at = [e * per_epoch for e in EPOCHS]
        epochs = data.simulate(optim.sgd(lr), b, at[-1], replicas, sampling="epochs", seed=[seed, 22, 3, b], at=at)
        exact = data.expected_losses(optim.sgd(lr), b, at[-1], sampling="epochs", at=at)
        batches = data.expected_losses(optim.sgd(lr), b, at[-1], sampling="batches", at=at)
        with_replacement = data.expected_losses(optim.sgd(lr), b, at[-1], sampling="replacement", at=at)
        for j, e in enumerate(EPOCHS):
            rows.append(
                [b, e, f"{epochs[0].mean[j]:.4g} ± {epochs[0].sem[j]:.2g}", exact[0].mean[j], batches[0].mean[j],
                 with_replacement[0].mean[j], exact[0].mean[j] / batches[0].mean[j],
                 f"{epochs[1].mean[j]:.4g} ± {epochs[1].sem[j]:.2g}", exact[1].mean[j], batches[1].mean[j]]
            )  # fmt: skip
    return Table(
        title=f"Shuffled epochs against independent batches ({data.name}, SGD ε = {LR:g}/h_max)",
        columns=[
            "B",
            "epochs",
            "training loss: epochs (MC)",
            "epochs (exact)",
            "independent batches (exact)",
            "with replacement (exact)",
            "epochs / batches (exact)",
            "population loss: epochs (MC)",
            "epochs (exact)",
            "independent batches (exact)",
        ],  # fmt: skip
        rows=rows,
        note="Losses are excesses over their minima (training: over L_N(θ_N); population: over L(0)). Within an epoch "
        "every example is used once, so the epoch's batches' noise sums to zero about the training gradient: the "
        "training loss falls far below the independent-batch floor (random reshuffling), while the population "
        "loss stays near ½θ_NᵀHθ_N, the price of fitting N examples. The exact epochs add the covariance "
        "−Σ_N/(N − 1) of two batches of one epoch to the independent batches' law (finite_data.epoch_correction).",
    )


def _generalisation_table(p, seed: int) -> Table:
    """Exact population and training losses after a long run with independent batches, as N grows."""
    lr, b, steps = LR / float(p.h.max()), 8, 4000
    rows = []
    for n in (16, 64, 256, 1024, 4096):
        data = nqm.FiniteDataset.draw(p, n, seed=[seed, 22, 4, n])
        train, test = data.expected_losses(optim.sgd(lr), b, steps, sampling="batches", at=[steps])
        bias = 0.5 * data.h @ data.optimum**2
        rows.append([n, train.mean[0], test.mean[0], bias, bias * n])
    return Table(
        title=f"Population against training loss as N grows (zhang2019(d={p.d}), SGD ε = {LR:g}/h_max, B = {b}, "
        f"{steps} steps)",
        columns=["N", "training loss", "population loss", "½θ_NᵀHθ_N (the gap)", "N·½θ_NᵀHθ_N"],
        rows=rows,
        note="Exact, independent batches. Once the run has settled, E[θ] = θ_N and the population loss exceeds the "
        "training loss by exactly ½θ_NᵀHθ_N = ½ξ̄ᵀH⁻¹ξ̄, whose mean over draws is tr(H⁻¹Σ)/(2N) = d/(2N) for "
        "Σ = H: N times it stays near d/2 = "
        f"{p.d / 2:g}. Small N: fewer examples, less batch noise ((N − B)/(N − 1)) and a lower training floor, but a "
        "larger gap.",
    )


def _smith_le_table(p, seed: int, d: int) -> Table:
    """B_opt minimising the population loss after a fixed number of epochs, over ε and N (exact, independent
    batches, averaged over drawn training sets), and the exponents of B_opt ∝ ε^a N^b fitted to it."""
    small = d < 50
    sizes, lrs, draws = ((256, 1024), (0.1, 0.4), 2) if small else ((256, 1024, 4096), (0.05, 0.1, 0.2, 0.4), 4)
    rows, fit = [], []
    for n in sizes:
        sets = [nqm.FiniteDataset.draw(p, n, seed=[seed, 22, 5, k, n]) for k in range(draws)]
        batches = np.unique(np.round(np.geomspace(1, n, 40)).astype(int))
        for lr in lrs:
            losses = np.array([[_population_after(data, lr, b, SMITH_LE_EPOCHS) for b in batches] for data in sets])
            i = int(np.argmin(losses.mean(axis=0)))
            rows.append([n, lr, int(batches[i]), lr * (n / batches[i] - 1), losses.mean(axis=0)[i]])
            fit.append((np.log(lr), np.log(n), np.log(batches[i])))
    x = np.array([[1.0, a, b] for a, b, _ in fit])
    (_, exp_lr, exp_n), *_ = np.linalg.lstsq(x, np.array([c for *_, c in fit]), rcond=None)
    return Table(
        title=f"Smith & Le's optimal batch B_opt ∝ εN? (zhang2019(d={p.d}), SGD, population loss after "
        f"{SMITH_LE_EPOCHS} epochs)",
        columns=["N", "ε", "B_opt", "noise temperature ε(N/B_opt − 1)", "population loss at B_opt"],
        rows=rows,
        note=f"Exact population losses with independent batches, averaged over {draws} drawn training sets, on "
        f"40 integer batch sizes from 1 to N (ratio about 1.2); each run sees every example {SMITH_LE_EPOCHS} times "
        f"on average. Fitted B_opt ∝ ε^{exp_lr:.2f} N^{exp_n:.2f}; Smith & Le 2018 (arXiv:1710.06451) argue for "
        "ε¹N¹ (a fixed noise temperature g = ε(N/B − 1)). Not judged: on the NQM the optimum balances the "
        "progress that ε·N/B steps make against the batches' noise.",
    )


def _population_after(data, lr: float, batch: int, epochs: int) -> float:
    steps = int(round(epochs * data.n / batch))
    return float(data.expected_losses(optim.sgd(lr), batch, steps, at=[steps])[1].mean[0])


def run(ctx: Context) -> Outcome:
    """V22 with the suite's budget (the claim registry's entry, :mod:`validation.claims`)."""
    size = SIZES.at(ctx.quick)
    checks, tables = compute(size.d, size.examples, size.replicas, ctx.seed)
    return Outcome(checks=checks, tables=tables)
