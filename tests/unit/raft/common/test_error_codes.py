"""Our one error-code enum (raft/common/errors.py) speaks Kafka's numbers: every code that Kafka's
schemas (kio) also name has kio's value, and no two of our names share a value."""

from kio.schema.errors import ErrorCode as KafkaErrorCode

from raft.common.errors import ErrorCode


def test_every_code_kafka_also_names_has_kafkas_value() -> None:
    kafka = {code.name.upper(): code.value for code in KafkaErrorCode}
    wrong = {code.name: (code.value, kafka[code.name])
             for code in ErrorCode if code.name in kafka and kafka[code.name] != code.value}
    assert wrong == {}


def test_no_two_names_share_a_value() -> None:
    assert len({code.value for code in ErrorCode}) == len(ErrorCode.__members__)
