"""`kraft chaos` hands its acknowledged produces to `kraft replay --history`
(tools/chaos/acknowledged_history.py): the lines written for a history (a churned name
reused under a new topic ID named by its ID, a stable name by its name, an uncertain ID
left out), and a planted loss in a synthetic partition log (an acknowledged offset
removed, or a value the log does not hold) failing the chaos verdict and named in its
report. The replay's partition checks run on the driver, as `kraft replay` runs them,
so no Spark is needed here."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from tests.support.chaos_history import NEW_ID, OLD_ID, Script
from tests.support.partition_data import ORDERS_ID, clean_log, write_partition_cluster
from tools.chaos.acknowledged_history import acknowledged_history, write_acknowledged_history
from tools.chaos.checker import CheckResult as HistoryResult
from tools.commands import chaos
from tools.replay.acknowledged import check_acknowledged, read_history
from tools.replay.inputs import from_cluster
from tools.replay.partition_history import partition_history
from tools.replay.partition_logs import read_replicas

END = 12  # clean_log()'s log end


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _produce(script: Script, name: str, value: str, start: float, end: float,
             offset: int, status: str = "ok") -> None:
    script.op("produce", {"name": name, "partition": 1, "value": value}, start, end,
              status=status, offset=offset)


def test_idempotent_acks_are_history_lines_but_those_resent_under_a_new_epoch() -> None:
    """The group workload's idempotent produces are acks=all writes too; a value stored
    twice under two epochs (librdkafka's re-send) is left out, as is an acknowledgement
    without an offset."""
    script = Script()
    for seq, offset in ((0, 0), (1, 1), (2, None)):
        script.op("idem_produce", {"producer": "idem-0.0", "seq": seq, "key": "k",
                                   "value": f"idem-0.0:{seq}", "topic": "g0"}, seq, seq + 1,
                  partition=2, **({} if offset is None else {"offset": offset}))
    script.op("idem_produce", {"producer": "idem-0.0", "seq": 3, "key": "k",
                               "value": "idem-0.0:3", "topic": "g0"}, 3, 4,
              partition=2, offset=-1001)  # librdkafka's "no offset"
    history = acknowledged_history(script.events, resent=frozenset({"idem-0.0:1"}))
    assert [json.loads(line) for line in history.lines] == [
        {"topic": "g0", "partition": 2, "offset": 0, "value": _b64("idem-0.0:0"),
         "key": _b64("k")}]
    assert history.to_json() == {"writes": 1, "left_out": 1}


def test_history_lines_name_a_reused_name_by_the_topic_id_it_had() -> None:
    script = Script()
    script.op("create", {"name": "s0"}, 0, 1, status="unknown")  # setup retried it
    script.op("create", {"name": "c0"}, 1, 2, topic_id=OLD_ID)
    _produce(script, "s0", "p-0", 3, 4, offset=0)
    _produce(script, "c0", "p-1", 3, 4, offset=0)
    _produce(script, "c0", "p-lost", 3, 4, offset=1, status="unknown")
    script.op("delete", {"name": "c0"}, 5, 6, topic_id=OLD_ID)
    script.op("create", {"name": "c0"}, 7, 8, topic_id=NEW_ID)
    _produce(script, "c0", "p-2", 9, 10, offset=0)  # offset 0 again: the new topic
    script.op("delete", {"topic_id": NEW_ID}, 11, 12, topic_id=NEW_ID, name="c0")
    script.op("create", {"name": "c0"}, 13, 16, status="unknown")
    _produce(script, "c0", "p-3", 14, 15, offset=0)  # OLD_ID's, NEW_ID's or a third?
    history = acknowledged_history(script.events)
    assert [json.loads(line) for line in history.lines] == [
        {"topic": "s0", "partition": 1, "offset": 0, "value": _b64("p-0")},
        {"topic": "c0", "partition": 1, "offset": 0, "value": _b64("p-1"), "topic_id": OLD_ID},
        {"topic": "c0", "partition": 1, "offset": 0, "value": _b64("p-2"), "topic_id": NEW_ID}]
    assert history.to_json() == {"writes": 3, "left_out": 1}


def test_a_create_overlapping_the_produce_leaves_its_topic_id_uncertain() -> None:
    script = Script()
    script.op("create", {"name": "c0"}, 1, 2, topic_id=OLD_ID)
    script.op("delete", {"name": "c0"}, 3, 4, status="unknown")
    script.op("create", {"name": "c0"}, 5, 7, topic_id=NEW_ID)
    _produce(script, "c0", "p-1", 6, 8, offset=0)
    assert acknowledged_history(script.events).to_json() == {"writes": 0, "left_out": 1}


def _orders_history(values: dict[int, str], *, keyed: bool = False) -> Script:
    """A chaos history whose produces to `orders` partition 0 were acknowledged at the
    offsets of `values` (the name churned: the lines carry its topic ID); `keyed`: with
    clean_log()'s keys, `k<offset % 3>`."""
    script = Script()
    script.op("create", {"name": "orders"}, 0, 1, topic_id=str(ORDERS_ID))
    for offset, value in values.items():
        key = {"key": f"k{offset % 3}"} if keyed else {}
        script.op("produce", {"name": "orders", "partition": 0, "value": value, **key},
                  2, 3, offset=offset)
    script.op("delete", {"name": "orders"}, 4, 5, status="failed")
    return script


def _chaos_verdict(root: Path, script: Script) -> dict[str, Any]:
    """The verdict of a chaos run whose history checks passed and whose replay ran the
    partition checks with the history file the run wrote."""
    written = write_acknowledged_history(root / chaos.ACKNOWLEDGED_FILE, script.events)
    replay_input = from_cluster(root)
    check = check_acknowledged(read_history(root / chaos.ACKNOWLEDGED_FILE),
                               read_replicas(replay_input.nodes),
                               partition_history(replay_input.node(1), None))
    replay = {"exit_code": 0 if check.passed else 1,
              "checks": [chaos.replay_check_summary(check.to_json())]}
    return chaos._verdict(seed=3, duration_s=60, voters=3, brokers=2, faults=["kill"],
                          injected=[], errors=[], final=None, elapsed_s=1.0,
                          result=HistoryResult(operations={}, violations=(), records_read=0,
                                               writes_verified=0),
                          replay_result=replay, acknowledged=written.to_json())


def _cluster(tmp_path: Path, leader_log: list[Any]) -> Path:
    return write_partition_cluster(tmp_path / "c", {4: leader_log, 5: leader_log},
                                   high_watermarks={4: END, 5: END})


def test_a_run_whose_logs_hold_every_acknowledged_produce_passes(tmp_path: Path) -> None:
    root = _cluster(tmp_path, clean_log())
    verdict = _chaos_verdict(root, _orders_history({o: f"v{o}" for o in range(END)}))
    assert verdict["ok"], verdict
    assert verdict["replay"]["checks"][0]["counts"]["checked"] == END
    assert verdict["acknowledged"] == {"writes": END, "left_out": 0}


def test_an_acknowledged_offset_missing_from_the_log_fails_the_verdict(tmp_path: Path) -> None:
    root = _cluster(tmp_path, clean_log()[:-1])  # offsets 10, 11 gone below the checkpoint
    verdict = _chaos_verdict(root, _orders_history({o: f"v{o}" for o in range(END)}))
    assert not verdict["ok"]
    check = verdict["replay"]["checks"][0]
    assert (check["name"], check["violations"]) == ("acknowledged-writes-present", 2)
    assert check["examples"][0]["reason"] == "missing: no record at offset 10"
    text = chaos._text(verdict, root)
    assert "acknowledged-writes-present: 2 violation(s)" in text
    assert "missing: no record at offset 10" in text


def test_a_value_the_log_does_not_hold_fails_the_verdict(tmp_path: Path) -> None:
    root = _cluster(tmp_path, clean_log())
    values = {o: f"v{o}" for o in range(END)} | {5: "never-stored"}
    verdict = _chaos_verdict(root, _orders_history(values))
    assert not verdict["ok"]
    check = verdict["replay"]["checks"][0]
    assert check["violations"] == 1
    assert check["examples"][0]["offset"] == 5
    assert "offset 5 holds another value" in chaos._text(verdict, root)


def test_a_record_planted_lost_in_a_compacted_log_fails_where_a_cleaned_one_passes(
        tmp_path: Path) -> None:
    """The produces carry their keys into the history file; a copy of a compacted log
    without offset 8 (k2, superseded by 11: what the cleaner removes) passes, a copy
    without offset 9 (k0's last record) fails, naming it."""
    history = _orders_history({o: f"v{o}" for o in range(END)}, keyed=True)
    assert json.loads(acknowledged_history(history.events).lines[8])["key"] == _b64("k2")
    cleaned, lost = clean_log(), clean_log()
    cleaned[4] = replace(cleaned[4], base_offset=9, records=cleaned[4].records[1:])
    lost[4] = replace(lost[4], records=lost[4].records[:1])
    for name, log, ok in (("cleaned", cleaned, True), ("lost", lost, False)):
        root = write_partition_cluster(tmp_path / name, {4: log, 5: log}, compacted=True,
                                       high_watermarks={4: END, 5: END})
        verdict = _chaos_verdict(root, history)
        assert verdict["ok"] is ok, verdict
    check = verdict["replay"]["checks"][0]
    assert [e["offset"] for e in check["examples"]] == [9]
    assert check["examples"][0]["reason"] == "missing: no record at offset 9"
