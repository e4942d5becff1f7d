"""librdkafka's own test suite against a local kraft-py cluster: `python -m
tools.librdkafka_suite` (`__main__.py`), docs/librdkafka-suite.md."""
