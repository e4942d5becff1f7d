"""The rules of the Markdown sessions (tests/support/doc_sessions.py): blocks found, lines
matched in order with `...` and `<NAME>` bindings, comments skipped, failures expected
where the session shows `error:`, paths moved under the session's directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.doc_sessions import expand, match, relocate, sessions


def test_only_console_blocks_are_sessions(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```\n$ kraft no\n```\n\n```console\n$ kraft topics --list\n  a\n"
                    "  (a comment)\n$ kraft x\n  error: boom\n```\n")
    (session,) = sessions(page)
    assert (session.line, [s.command for s in session.steps]) == (5, ["kraft topics --list",
                                                                       "kraft x"])
    assert session.steps[0].expected == ("a", "(a comment)")
    assert not session.steps[0].expects_failure
    assert session.steps[1].expects_failure


def test_lines_match_in_order_and_bind_names() -> None:
    output = "Created topic orders (TopicId: AbC_d).\nother\nLeader: node 2 (epoch 5) at x"
    bound = match(["Created topic orders (TopicId: <ID>).", "Leader: node <L> ... at x"],
                  output, {})
    assert bound == {"ID": "AbC_d", "L": "2"}
    assert match(["Leader: node <L> ... at x", "Created ..."], output, {}) != bound
    assert isinstance(match(["Created topic orders (TopicId: <ID>)."], output, {"ID": "zz"}),
                      str)


def test_comments_and_ellipses_are_not_checked() -> None:
    assert match(["(anything)", "...", "a ... c"], "a b c", {}) == {}
    assert isinstance(match(["a ... d"], "a b c", {}), str)


def test_names_and_paths_expand(tmp_path: Path) -> None:
    assert expand("kraft quorum kill --node <L>", {"L": "3"}) == "kraft quorum kill --node 3"
    with pytest.raises(ValueError, match="<L> is used before"):
        expand("--node <L>", {})
    assert relocate("--cluster /tmp/demo1 --out /tmp/demo1/r", tmp_path) == \
        f"--cluster {tmp_path}/demo1 --out {tmp_path}/demo1/r"
