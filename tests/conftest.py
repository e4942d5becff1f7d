"""Hypothesis profiles, chosen with HYPOTHESIS_PROFILE: `ci` (the default, derandomized so
CI is repeatable), `dev`, and `soak` (random draws, ten times the examples: new inputs on
every run, for `make soak`; a failure prints the blob that reproduces it)."""

import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", derandomize=True, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, max_examples=500)
settings.register_profile("soak", derandomize=False, deadline=None, max_examples=1000,
                          print_blob=True, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
