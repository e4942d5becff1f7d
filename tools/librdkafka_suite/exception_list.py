"""The librdkafka tests this project does not run against its cluster, each with why
(test number or full test name -> reason). Tests test.c itself flags as needing no
broker, a manual run, another scenario or a known librdkafka fix are exceptions without
a row here (`outcomes.derived_exception`). A reason names what the test needs that a
kraft-py cluster started by `tools/librdkafka_suite/__main__.py` does not give it.
"""

from __future__ import annotations

EXCEPTIONS: dict[str, str] = {
}
