"""Every verb's and action's --help explains each option and ends with one example, and
each example is a command line the parser accepts (so an option renamed or removed
fails here, not in a newcomer's shell)."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Iterator

import pytest

from tools.cli import EXAMPLES, VERBS, build_parser


def _parsers(parser: argparse.ArgumentParser, path: str
             ) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


def _verb_parser(verb: str) -> argparse.ArgumentParser:
    (verbs,) = (a for a in build_parser(verb)._actions
                if isinstance(a, argparse._SubParsersAction))
    parser = verbs.choices[verb]
    assert isinstance(parser, argparse.ArgumentParser)
    return parser


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_every_option_has_help_and_every_help_ends_with_an_example(verb: str) -> None:
    for path, parser in _parsers(_verb_parser(verb), verb):
        undocumented = [a.option_strings or a.dest for a in parser._actions
                        if not a.help and not isinstance(a, argparse._SubParsersAction)]
        assert undocumented == [], path
        shown = "".join(parser.format_help().split())  # as wrapped, without the spaces
        assert shown.endswith("example:" + "".join(EXAMPLES[path].split())), path


@pytest.mark.parametrize("path", sorted(EXAMPLES))
def test_every_example_parses(path: str) -> None:
    argv = shlex.split(EXAMPLES[path])[1:]
    verb, *actions = path.split()
    assert argv[0] == verb
    assert set(actions) <= set(argv)  # an action's example runs that action
    build_parser(verb).parse_args(argv)  # a usage error raises CommandError
