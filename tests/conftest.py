import os

os.environ.setdefault("MPLBACKEND", "Agg")

from hypothesis import settings  # noqa: E402

# Deterministic by default (DESIGN §5): the same examples on every run and machine.
settings.register_profile("default", derandomize=True, max_examples=40, deadline=None, print_blob=True)
settings.register_profile("thorough", max_examples=500, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
