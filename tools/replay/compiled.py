"""The per-node scan compiled by mypyc, used when it is there and current.

tools/replay/sequential.py is the scan: about 1.3 us a record in CPython, the one long
task of a replay. The same source compiled by mypyc (part of mypy, a dev dependency; it
turns the module into a C extension, no edit to the source) runs the scan in about a
quarter less CPU (docs/benchmarks.md).

    python -m tools.replay.compiled        (run by `make compile`)

compiles a copy of sequential.py as the module `kraft_replay_scan` into this
interpreter's site-packages and writes the SHA-256 of the source it was built from beside
it. `scan_module()` returns that module only while the digest matches sequential.py as
it is now, so an edited source never runs as stale compiled code. Anywhere it is absent
or stale (no C compiler, a Spark executor on another machine, a mutant copy of the tree)
or with KRAFT_REPLAY_INTERPRETED=1 set, the interpreted module runs: the same results
(tests/property/test_compiled_scan.py), slower.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from types import ModuleType

from tools.replay import sequential

MODULE = "kraft_replay_scan"
DIGEST_SUFFIX = ".sha256"
INTERPRETED = "KRAFT_REPLAY_INTERPRETED"  # set (to anything): always the interpreted scan
_MYPY_CONFIG = "[mypy]\nignore_missing_imports = True\n"


def source_digest() -> str | None:
    """SHA-256 of sequential.py's bytes (read through its loader: a zipped tree too)."""
    try:
        data = sequential.__loader__.get_data(sequential.__file__)  # type: ignore[union-attr]
    except (OSError, AttributeError):
        return None
    return hashlib.sha256(data).hexdigest()


def compiled_module() -> ModuleType | None:
    """`kraft_replay_scan` when it was built from sequential.py as it is now, else None."""
    spec = importlib.util.find_spec(MODULE)
    if spec is None or spec.origin is None:
        return None
    try:
        built_from = Path(spec.origin).with_name(MODULE + DIGEST_SUFFIX).read_text().strip()
    except OSError:
        return None
    if built_from != source_digest():
        return None
    try:
        return importlib.import_module(MODULE)
    except ImportError:
        return None


@functools.cache
def scan_module() -> ModuleType:
    """The module whose NodeScan the replay's tasks run: compiled when current."""
    if os.environ.get(INTERPRETED):
        return sequential
    return compiled_module() or sequential


def build(target: Path) -> str:
    """Compile sequential.py into `target` unless what is there is current; returns what
    happened, in one line. The digest goes last (and the old one first), so a failed or
    interrupted build leaves nothing `compiled_module` would take."""
    digest = source_digest()
    if digest is None:
        return f"{MODULE}: not built (sequential.py unreadable)"
    if compiled_module() is not None:
        return f"{MODULE}: up to date"
    stamp = target / (MODULE + DIGEST_SUFFIX)
    stamp.unlink(missing_ok=True)
    root = Path(__file__).resolve().parents[2]
    with tempfile.TemporaryDirectory(prefix="kraft-mypyc-") as scratch:
        work = Path(scratch)
        shutil.copyfile(sequential.__file__, work / f"{MODULE}.py")
        (work / "mypy.ini").write_text(_MYPY_CONFIG)
        done = subprocess.run(
            [sys.executable, "-m", "mypyc", "--config-file", "mypy.ini", f"{MODULE}.py"],
            cwd=work, env={**os.environ, "MYPYPATH": str(root)}, capture_output=True,
            text=True, check=False)
        built = sorted(work.glob(f"{MODULE}*.so"))
        if done.returncode != 0 or not built:
            last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            return f"{MODULE}: not built ({last[0]}): the replay runs the interpreted scan"
        for library in built:  # replaced, not rewritten: a running process keeps its copy
            shutil.copyfile(library, target / (library.name + ".new"))
            os.replace(target / (library.name + ".new"), target / library.name)
    stamp.write_text(f"{digest}\n")
    importlib.invalidate_caches()
    return f"{MODULE}: built into {target}"


def main() -> None:
    print(build(Path(sysconfig.get_paths()["platlib"])))


if __name__ == "__main__":
    main()
