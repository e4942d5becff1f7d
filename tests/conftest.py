"""Hypothesis profiles, chosen with HYPOTHESIS_PROFILE: `ci` (the default, derandomized so
CI is repeatable), `dev`, and `soak` (random draws, ten times the examples: new inputs on
every run, for `make soak`; a failure prints the blob that reproduces it). Each
pytest-xdist worker, and every process it starts, picks listener ports from its own
slice of the range (tools/ports.py): two workers' clusters never pick the same port
between picking it and a node binding it (a chaos run's broker once died so)."""

import os

from hypothesis import HealthCheck, settings

from tools.ports import PORT_SLICE_ENV

settings.register_profile("ci", derandomize=True, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, max_examples=500)
settings.register_profile("soak", derandomize=False, deadline=None, max_examples=1000,
                          print_blob=True, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if _worker.startswith("gw") and _worker[2:].isdigit():
    os.environ[PORT_SLICE_ENV] = \
        f"{_worker[2:]}/{os.environ.get('PYTEST_XDIST_WORKER_COUNT', '1')}"
