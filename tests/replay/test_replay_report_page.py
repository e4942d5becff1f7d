"""The HTML report's time axis over the scripted story and its chaos faults
(tests/support/report_page.py, no Spark): the page read with html.parser (always runs)
and the same page in a headless Chromium (skipped when the machine has no browser): one
timeline element per event of each kind, availability rows, every topic clickable with
its whole story, and nothing loaded from the network."""

from __future__ import annotations

import json
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.support.headless_browser import HeadlessPage, find_chromium
from tests.support.report_page import story_report
from tests.support.synthetic_logs import STORY_FAULTS, STORY_OTHER, STORY_TOPIC

# the story's events (tests/support/synthetic_logs.py): 3 epochs; brokers 4-6 each
# registered (fenced until unfenced) and fenced once; orders-0 and -1 leaderless from
# +2500 to +3000 ms; 4 ISR shrinks and 2 expansions; 6 topic events; the fault file's 6
EVENTS = {"fault": len(STORY_FAULTS), "election": 3, "fenced": 6, "leaderless": 2, "isr": 6,
          "topic": 6}
LANES = ["chaos faults", "elections", "broker 4 fenced", "broker 5 fenced",
         "broker 6 fenced", "no leader", "ISR changes", "topics"]
ORDERS_STORY = ["create", "config", "rename", "resize", "delete"]


class Page(HTMLParser):
    """What the tests look for: elements by tag, their attributes, the lane labels, the
    embedded stories and every address the page would load."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.texts: list[tuple[str, str]] = []
        self.stories: dict[str, list[dict[str, object]]] = {}
        self._open: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))
        self._open.append((tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        while self._open and self._open.pop()[0] != tag:
            pass

    def handle_data(self, data: str) -> None:
        if not self._open:
            return
        tag, attrs = self._open[-1]
        self.texts.append((tag, data))
        if attrs.get("id") == "topic-stories":
            self.stories = json.loads(data)

    def with_class(self, tag: str, *classes: str) -> list[dict[str, str | None]]:
        return [attrs for t, attrs in self.elements if t == tag
                and set(classes) <= set((attrs.get("class") or "").split())]


@pytest.fixture(scope="module")
def page_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return story_report(tmp_path_factory.mktemp("report"))


@pytest.fixture(scope="module")
def page(page_file: Path) -> Page:
    parsed = Page()
    parsed.feed(page_file.read_text(encoding="utf-8"))
    return parsed


def test_timeline_holds_one_element_per_event_of_each_kind_when_rendered(page: Page) -> None:
    counts = Counter(kind for kind in EVENTS for _ in page.with_class("rect", "ev", kind))
    assert counts == EVENTS
    fenced = Counter(a["data-detail"] for a in page.with_class("rect", "ev", "fenced"))
    assert fenced == {"register": 3, "fence": 3}
    isr = Counter(a["data-detail"] for a in page.with_class("rect", "ev", "isr"))
    assert isr == {"shrink": 4, "expand": 2}
    for attrs in page.with_class("rect", "ev"):  # placed by the script from its times
        assert attrs["data-t0"] is not None
        assert int(attrs["data-t0"]) > 0
    lanes = [text for tag, text in page.texts if tag == "text"]
    assert lanes == LANES


def test_each_topic_row_and_topic_event_names_a_story_when_rendered(page: Page) -> None:
    rows = page.with_class("tr", "topic")
    assert [r["data-topic"] for r in rows] == [str(STORY_TOPIC), str(STORY_OTHER)]
    assert {a["data-topic"] for a in page.with_class("rect", "ev", "topic")} == \
        {str(STORY_TOPIC), str(STORY_OTHER)}
    assert [e["event"] for e in page.stories[str(STORY_TOPIC)]] == ORDERS_STORY
    assert [e["name"] for e in page.stories[str(STORY_TOPIC)]][-1] == "payments"
    assert [e["event"] for e in page.stories[str(STORY_OTHER)]] == ["create"]


def test_availability_lists_each_partition_life_longest_leaderless_first(page: Page) -> None:
    rows = page.with_class("tr", "availability")
    assert len(rows) == 4  # orders 0-2 and audit 0
    cells = [text for tag, text in page.texts if tag == "td"]
    assert "500 ms " in cells  # orders-0 and -1 leaderless for 500 ms


def test_page_loads_nothing_from_outside_when_opened(page: Page, page_file: Path) -> None:
    for _, attrs in page.elements:
        for name in ("src", "href"):
            value = attrs.get(name)
            assert value is None or value.startswith(("data:", "#")), (name, value)
    assert not [attrs for tag, attrs in page.elements if tag == "link"]
    assert "http" not in page_file.read_text(encoding="utf-8").replace(
        "data:image/png;base64,", "")


# --- the same page in a browser -----------------------------------------------------

CHROMIUM = find_chromium()
needs_browser = pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium on the PATH (apt-get install chromium); the "
    "html.parser tests above check the same structure")


@needs_browser
def test_browser_shows_the_timeline_and_a_topic_s_story_when_clicked(page_file: Path) -> None:
    assert CHROMIUM is not None
    with HeadlessPage(CHROMIUM) as browser:
        browser.open(page_file)
        for kind, count in EVENTS.items():
            assert browser.evaluate(f"document.querySelectorAll('#axis-svg .ev.{kind}')"
                                    ".length") == count, kind
        # the script placed every event inside the lanes' area, the whole log shown
        assert browser.evaluate("[...document.querySelectorAll('#axis-svg .ev')].every("
                                "e => +e.getAttribute('x') >= 150 && "
                                "+e.getAttribute('x') <= 1000)")
        assert browser.evaluate("document.getElementById('axis-window').textContent") \
            .startswith("showing +0.00 s to +6.00 s")
        assert browser.evaluate("document.querySelectorAll('#axis-ticks text').length") > 3
        assert browser.evaluate("document.getElementById('story').textContent") == ""

        browser.click(f"tr.topic[data-topic='{STORY_TOPIC}']")
        story = browser.evaluate("[...document.querySelectorAll('#story tr.story-row')]"
                                 ".map(r => r.cells[3].textContent)")
        assert story == ORDERS_STORY
        assert "Topic orders / payments" in browser.evaluate(
            "document.querySelector('#story h3').textContent")

        browser.click("#zoom-in")  # half the window, around its middle
        assert browser.evaluate("document.getElementById('axis-window').textContent") \
            .startswith("showing +1.50 s to +4.50 s")
        browser.click("#zoom-reset")
        assert browser.evaluate("document.getElementById('axis-window').textContent") \
            .startswith("showing +0.00 s to +6.00 s")
        browser.click(f"#axis-svg .ev.topic[data-topic='{STORY_OTHER}']")
        assert browser.evaluate("[...document.querySelectorAll('#story tr.story-row')]"
                                ".map(r => r.cells[4].textContent)") == ["audit"]
        assert "audit: created with 1 partition(s)" in browser.evaluate(
            "document.getElementById('axis-info').textContent")
