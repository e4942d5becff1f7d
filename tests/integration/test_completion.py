"""`kraft completion bash|zsh` completes verbs, actions and options from the parser: the
script printed by the CLI, sourced in a real bash, offers what the parser accepts after
the words typed so far (an option added to a verb shows up without touching the
script); zsh's is the same function behind bashcompinit."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.quorum_support import kraft

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    printed = kraft("completion", "bash")
    assert printed.returncode == 0, printed.stderr
    path = tmp_path_factory.mktemp("completion") / "kraft.bash"
    path.write_text(printed.stdout)
    return path


def complete(script: Path, *words: str) -> list[str]:
    """What the script offers for the last of `words` (the one being typed)."""
    quoted = " ".join(f"'{w}'" for w in ("kraft", *words))
    done = subprocess.run(
        ["bash", "-c", f'source "$0"; COMP_WORDS=({quoted}); COMP_CWORD={len(words)}; '
         '_kraft; printf "%s\\n" "${COMPREPLY[@]}"', str(script)],
        capture_output=True, text=True, timeout=30, check=True)
    return done.stdout.split()


@pytest.mark.parametrize(("words", "offered"), [
    (("quorum", "st"), ["start", "stop"]),
    (("quorum", "start", "--ba"), ["--base-port"]),
    (("--log-level", "INFO", "top"), ["topics"]),
    (("consume", "--topic", "t", "--from"), ["--from-beginning"]),
    (("produce", "--key-"), ["--key-separator", "--key-prefix"]),
])
def test_bash_completes_from_the_parser(script: Path, words: tuple[str, ...],
                                        offered: list[str]) -> None:
    assert complete(script, *words) == offered


def test_every_verb_is_offered_first(script: Path) -> None:
    from tools.cli import VERBS
    assert set(VERBS) <= set(complete(script, ""))


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed here")
def test_zsh_loads_the_script() -> None:
    printed = kraft("completion", "zsh")
    done = subprocess.run(["zsh", "-c", 'eval "$0"; (( $+functions[_kraft] ))',
                           printed.stdout], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
