import os

os.environ.setdefault("MPLBACKEND", "Agg")

from hypothesis import settings  # noqa: E402

# Deterministic by default: the same examples on every run and machine (hypothesis never picks the seeds of a
# statistical assertion; those are fixed in the tests).
settings.register_profile("default", derandomize=True, max_examples=40, deadline=None, print_blob=True)
settings.register_profile("thorough", max_examples=500, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def quick_report(tmp_path_factory):
    """One ``nqm validate --quick`` run shared by the tests that read its report: (directory, exit status)."""
    from nqm.cli import main

    out = tmp_path_factory.mktemp("quick-report")
    return out, main(["validate", "--quick", "--out", str(out), "--seed", "0"])


@pytest.fixture(scope="session")
def example_toml() -> str:
    """The problem file a new user writes first (the README's example)."""
    return """name = "power law 1.0"
[spectrum]
kind = "power_law"
d = 1000
exponent = 1.0
[noise]
kind = "power"
scale = 1.0
q = 1.0
[init]
var = 1.0
"""
