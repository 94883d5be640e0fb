"""Planted bugs: apply each one-line mutation, run the tests that should catch it, and report which did.

    python bench/mutations.py                 # every mutation in MUTATIONS
    python bench/mutations.py measure-n-1     # those whose name contains the argument

Each mutation replaces one exact snippet of a source file (which must occur exactly once), runs pytest on the
named tests, and restores the file whatever happens. A mutation is *caught* when pytest fails; the report names the
failing tests. Keep the list growing: a bug that no test catches is a test to write.
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mutation:
    name: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


REFS = ("tests/test_independent_references.py",)

MUTATIONS = [
    # the six one-line mutations of an outside audit that the suite missed (issue: every seed, every planted bug)
    Mutation(
        "dense-scan-skips-a-step-between-chunks",
        "nqm/dynamics/runs/steps.py",
        "        start, chunk = ts[-1] + 1, min(",
        "        start, chunk = ts[-1] + 2, min(",
        REFS,
    ),
    Mutation(
        "monotone-tolerance-loosened",
        "nqm/dynamics/runs/sgd.py",
        "np.all(loss.v0 >= rows.v_inf * (1 - 1e-12), axis=1)",
        "np.all(loss.v0 >= rows.v_inf * (1 - 1e-1), axis=1)",
        REFS,
    ),
    Mutation(
        "frontier-fit-s-min-with-the-wrong-sign-of-log-b",
        "nqm/dynamics/studies/frontier.py",
        "    s_min = np.exp(np.mean(log_s - np.logaddexp(0.0, u[:, None] - log_b), axis=1))",
        "    s_min = np.exp(np.mean(log_s - np.logaddexp(0.0, u[:, None] + log_b), axis=1))",
        REFS,
    ),
    Mutation(
        "adam-preconditioner-without-1/B",
        "nqm/theory.py",
        "np.diag(p.parameter_sigma) / b[..., None]",
        "np.diag(p.parameter_sigma) + 0 * b[..., None]",
        REFS,
    ),
    Mutation(
        "noise-scales-along-b-simple-v@h",
        "nqm/dynamics/moments/expected.py",
        "p.trace_sigma / (v @ p.h**2)",
        "p.trace_sigma / (v @ p.h)",
        REFS,
    ),
    Mutation(
        "problem-file-default-q",
        "nqm/problem_file.py",
        '        where.number(table, "q", "[noise]", 1.0, positive=False),',
        '        where.number(table, "q", "[noise]", 2.0, positive=False),',
        REFS,
    ),
    Mutation(
        "sgd-tuner-ignores-rising-coordinates",
        "nqm/dynamics/runs/sgd_tuning.py",
        "    below = eps_cap < feasible * (1 - 1e-9)",
        "    below = eps_cap < 0 * feasible",
        ("tests/test_rising_coordinates.py",),
    ),
    Mutation(
        "rising-first-hit-bound-not-a-bound",
        "nqm/dynamics/runs/sgd.py",
        "float(w[falling] @ np.exp(b * ell[falling]))",
        "float(w[falling] @ np.exp(a * ell[falling]))",
        ("tests/test_rising_coordinates.py",),
    ),
    Mutation(
        "critical-noise-scales-end-one-step-early",
        "nqm/dynamics/studies/critical.py",
        "    ends = noise_scales_along(p, opt, batch, steps, at=[0, steps], init_var=init_var)",
        "    ends = noise_scales_along(p, opt, batch, steps, at=[0, steps - 1], init_var=init_var)",
        REFS,
    ),
    Mutation(
        "sign-descent-root-b-to-b",
        "nqm/theory.py",
        "np.where(self.g == 0, 0.0, self.g * np.sqrt(b)[:, None] / sd)",
        "np.where(self.g == 0, 0.0, self.g * b[:, None] / sd)",
        REFS,
    ),
    Mutation(
        "sign-descent-pair-covariance-halved",
        "nqm/theory.py",
        "    cov = _sign_covariance(inputs.a[0, i], inputs.a[0, j], rho)",
        "    cov = 0.5 * _sign_covariance(inputs.a[0, i], inputs.a[0, j], rho)",
        REFS,
    ),
    Mutation(
        "measure-sigma-by-n-1",
        "nqm/measure/measurement.py",
        "    tr_sigma /= model.n\n",
        "    tr_sigma /= model.n - 1\n",
        ("tests/test_measure.py",),
    ),
    Mutation(
        "measure-h-sigma-by-n-1",
        "nqm/measure/measurement.py",
        "        tr_h_sigma /= model.n\n",
        "        tr_h_sigma /= model.n - 1\n",
        ("tests/test_measure.py",),
    ),
    Mutation(
        "jax-hessian-of-one-batch",
        "nqm/measure/jax_model.py",
        "            return jnp.mean(jax.vmap(one, in_axes=(None, 0, 0))(theta, x, y))",
        "            return jnp.mean(jax.vmap(one, in_axes=(None, 0, 0))(theta, x[:32], y[:32]))",
        ("tests/test_measure.py",),
    ),
    Mutation(
        "slq-weights-without-probe-norm",
        "nqm/measure/measurement.py",
        "    return nodes, size * weights\n",
        "    return nodes, weights * start.size\n",
        ("tests/test_measure.py",),
    ),
    Mutation(
        "local-nqm-start-without-1/h",
        "nqm/measure/local.py",
        "(m.eigenvalues, m.gradient_top / m.eigenvalues, top_c)",
        "(m.eigenvalues, m.gradient_top, top_c)",
        ("tests/test_measure.py",),
    ),
    Mutation(
        "estimators-with-replacement-expectation",
        "nqm/measure/measurement.py",
        "        expected_tr_sigma=tr_sigma * n / (n - 1),",
        "        expected_tr_sigma=tr_sigma,",
        ("tests/test_measure.py",),
    ),
    Mutation(
        "one-step-law-with-replacement",
        "nqm/measure/one_step.py",
        "    kappa = np.array([batch_factor(m.n, b, sampling) for b in np.atleast_1d(batch_sizes)])",
        "    kappa = 1.0 / np.atleast_1d(batch_sizes)",
        ("tests/test_real_network.py",),
    ),
    Mutation(
        "one-step-fit-with-intercept",
        "nqm/measure/one_step.py",
        "    powers = np.arange(1, degree + 1)",
        "    powers = np.arange(0, degree)",
        ("tests/test_real_network.py",),
    ),
    Mutation(
        "v15-no-peak-centre-nan",
        "validation/v15_sign_descent.py",
        "    return b_peak if np.isfinite(b_peak) else 1.0\n",
        "    return b_peak\n",
        ("tests/test_validation_seeds.py",),
    ),
    # the hardening pass (issue 42): each fix, undone or bent by one line
    Mutation(
        "update-drops-the-decay",
        "nqm/optim.py",
        '        coupled, decoupled = getattr(self, "coupled_decay", 0.0), getattr(self, "decoupled_rate", 0.0)\n',
        "        coupled, decoupled = 0.0, 0.0\n",
        ("tests/test_optimizer_update.py",),
    ),
    Mutation(
        "update-decays-the-new-theta",
        "nqm/optim.py",
        "            new = (new[0] - decoupled * theta, *new[1:])",
        "            new = (new[0] - decoupled * new[0], *new[1:])",
        ("tests/test_optimizer_update.py",),
    ),
    Mutation(
        "sweep-load-cuts-the-file",
        "nqm/sweep/records.py",
        '            if repair:\n                with open(path, "r+b") as f:',
        '            if True:\n                with open(path, "r+b") as f:',
        ("tests/test_sweep.py",),
    ),
    Mutation(
        "finite-data-forgets-the-basis-in-the-gradient",
        "nqm/finite_data.py",
        "            return to_run(pre * (self.h * to_theta(x) + _batch_mean(self.examples, idx, self.mean_noise)))",
        "            return pre * (self.h * to_theta(x) + _batch_mean(self.examples, idx, self.mean_noise))",
        ("tests/test_finite_data.py",),
    ),
    Mutation(
        "epoch-covariance-over-n-1",
        "nqm/finite_data.py",
        "    return -(sigma**2) * batch_size / (n - batch_size) * out",
        "    return -(sigma**2) * batch_size / (n - 1) * out",
        ("tests/test_finite_data.py",),
    ),
    Mutation(
        "epoch-boundary-off-by-one",
        "nqm/finite_data.py",
        "        first = np.arange(0, steps, per_epoch)",
        "        first = np.arange(0, steps, per_epoch + 1)",
        ("tests/test_finite_data.py",),
    ),
    Mutation(
        "long-run-sum-without-its-end-terms",
        "nqm/dynamics/studies/critical.py",
        "np.diff(t)[:, None], axis=0) + 0.5 * (f[0] + f[-1])",
        "np.diff(t)[:, None], axis=0)",
        ("tests/test_critical.py",),
    ),
    Mutation(
        "controls-set-aside-too-easily",
        "validation/stats.py",
        "<= 2.0 * ((0.0 if c.exact else z_crit) * c.se + slack)",
        "<= 1e9 * ((0.0 if c.exact else z_crit) * c.se + slack)",
        ("tests/test_validation.py::test_validate_on_a_problem_file",),
    ),
    Mutation(
        "plot-overwrites-any-file",
        "nqm/cli.py",
        "    if out.exists() and out.stem != args.name and not args.force:",
        "    if False:",
        ("tests/test_plots.py",),
    ),
    Mutation(
        "problem-file-seed-may-be-negative",
        "nqm/problem_file.py",
        '        return self.integer(table, "seed", place, 0, low=0)',
        '        return self.integer(table, "seed", place, 0, low=-(2**31))',
        ("tests/test_problem_file.py",),
    ),
]


def run(mutation: Mutation) -> tuple[bool, str, float]:
    path = ROOT / mutation.path
    source = path.read_text()
    if source.count(mutation.old) != 1:
        raise SystemExit(f"{mutation.name}: the snippet occurs {source.count(mutation.old)} times in {mutation.path}")
    start = time.perf_counter()
    try:
        path.write_text(source.replace(mutation.old, mutation.new))
        out = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *mutation.tests],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
    finally:
        path.write_text(source)
    failed = [line.split(" ")[1] for line in out.stdout.splitlines() if line.startswith("FAILED ")]
    return out.returncode != 0, ", ".join(failed) or out.stdout.strip().splitlines()[-1], time.perf_counter() - start


def main(argv: list[str]) -> int:
    chosen = [m for m in MUTATIONS if not argv or any(a in m.name for a in argv)]
    missed = 0
    for mutation in chosen:
        caught, by, seconds = run(mutation)
        missed += not caught
        print(f"{'caught' if caught else 'MISSED'}  {mutation.name:40s} {seconds:6.1f} s  {by}", flush=True)
    print(f"{len(chosen) - missed} of {len(chosen)} planted bugs caught")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
