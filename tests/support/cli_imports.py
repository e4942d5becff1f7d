"""Run a `kraft` verb in a fresh interpreter and report which heavy modules it loaded.

A verb's start time is mostly imports: the Kafka codec (kio) alone cost `kraft quorum
describe` 0.35 s. `run_verb` runs `tools.cli.main` in a new process (nothing imported by
the test leaks in) and returns its exit code, its stdout and the heavy modules found in
`sys.modules` once it returned.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

# imported only where they are used: never by a verb that only talks to the controllers
# (tools.config, the node configuration: only with a TLS or SASL properties file;
# metadata.records, every record type: the admin messages need none)
# (hypothesis: never, by any verb, see `tools.cli._keep_hypothesis_out`)
HEAVY_MODULES = ("kio", "trio", "cryptography", "pyspark", "confluent_kafka", "tools.config",
                 "metadata.records", "hypothesis")
_MARKER = "--- loaded:"
_PROBE = f"""
import json, sys
from tools.cli import main
code = main(sys.argv[1:])
print({_MARKER!r}, json.dumps({{"exit": code, "loaded":
      sorted(m for m in {HEAVY_MODULES!r} if sys.modules.get(m) is not None)}}))
"""


@dataclass(frozen=True)
class VerbRun:
    exit_code: int
    stdout: str  # the verb's own output, without the probe's line
    stderr: str
    loaded: list[str]  # the HEAVY_MODULES the verb imported


def run_verb(*args: str, timeout_s: float = 30, cwd: Path | None = None) -> VerbRun:
    done = subprocess.run([sys.executable, "-c", _PROBE, *args], capture_output=True,
                          text=True, timeout=timeout_s, check=False, cwd=cwd)
    own, _, probe = done.stdout.rpartition(_MARKER)
    assert probe, f"the verb did not return: {done.stderr}"
    report = json.loads(probe)
    return VerbRun(report["exit"], own, done.stderr, report["loaded"])
