"""The admin APIs a broker without transactions and with one log directory answers as a
Kafka 3.9 broker would (broker/kafka/admin/transactions_api.py, log_dirs_api.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import trio

from broker.kafka.admin.log_dirs_api import move_error
from broker.kafka.admin.transactions_api import handle_list_transactions_request
from raft.common.errors import ErrorCode


def test_a_move_to_the_one_log_dir_is_done_and_elsewhere_not_found(tmp_path: Path) -> None:
    log_dir = tmp_path / "data"
    assert move_error(str(log_dir), log_dir, allowed=True) == ErrorCode.NONE
    assert move_error(f"{tmp_path}/./data", log_dir, allowed=True) == ErrorCode.NONE
    assert move_error("/tmp", log_dir, allowed=True) == ErrorCode.LOG_DIR_NOT_FOUND
    assert move_error(str(log_dir), log_dir, allowed=False) == \
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def test_transactions_are_listed_empty_with_the_unknown_state_filters_named() -> None:
    request = SimpleNamespace(state_filters=("Ongoing", "Sleeping", "CompleteAbort", "x"))
    answer = trio.run(handle_list_transactions_request, None, request, 1)
    assert (answer["transaction_states"], answer["unknown_state_filters"]) == \
        ([], ["Sleeping", "x"])
