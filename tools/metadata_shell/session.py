"""The shell's two front ends over text streams: one command from the command line, or
command lines read until `exit` or the end of input.

A prompt is shown only when a person is typing (the caller says so: stdin is a
terminal), so piped input gives just the commands' output. Lines are split as a POSIX
shell splits them (quotes; `#` starts a comment), which lets a script piped in carry
comments.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from typing import TextIO

from tools.metadata_shell.commands import USAGE, Outcome, Shell

LineReader = Callable[[str], str]  # prompt -> line; raises EOFError at the end of input


def run_one_shot(shell: Shell, words: Sequence[str], stdout: TextIO, stderr: TextIO) -> int:
    """Run one command; its status is the exit code."""
    outcome = shell.execute(words)
    emit(outcome, stdout, stderr)
    return outcome.status


def run_interactive(shell: Shell, read_line: LineReader, stdout: TextIO, stderr: TextIO, *,
                    prompt: bool) -> int:
    """Read and run command lines until `exit` or the end of input. A failed command
    is reported and the session goes on, so the exit code is 0."""
    while True:
        try:
            line = read_line(f"{shell.cwd} >> " if prompt else "")
        except EOFError:
            if prompt:  # leave the terminal on a fresh line after Ctrl-D
                stdout.write("\n")
            return 0
        except KeyboardInterrupt:  # Ctrl-C drops the line being typed, as shells do
            stdout.write("\n")
            continue
        try:
            words = shlex.split(line, comments=True)
        except ValueError as exc:  # an unclosed quote
            emit(Outcome(err=(f"metadata-shell: {exc}",), status=USAGE), stdout, stderr)
            continue
        outcome = shell.execute(words)
        emit(outcome, stdout, stderr)
        if outcome.exit:
            return 0


def stream_reader(stream: TextIO) -> LineReader:
    """Lines from a pipe or file; the prompt is never written."""
    def read_line(prompt: str) -> str:
        line = stream.readline()
        if not line:
            raise EOFError
        return line

    return read_line


def emit(outcome: Outcome, stdout: TextIO, stderr: TextIO) -> None:
    # each stream flushed in turn: a terminal, or one file given both, shows the lines
    # in the order the commands ran
    for line in outcome.out:
        stdout.write(line + "\n")
    stdout.flush()
    for line in outcome.err:
        stderr.write(line + "\n")
    stderr.flush()
