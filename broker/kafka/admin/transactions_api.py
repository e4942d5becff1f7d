"""The transaction APIs an admin client reaches for, on a broker without transactions.

Transactional producers are refused here (broker/kafka/partitions/produce.py): no
transaction is ever open. So, as a Kafka 3.9 broker with none open answers:
- ListTransactions (API 66, v0-v1; kafka-transactions.sh list, find-hanging): an empty
  list, the state filters Kafka does not know named in `unknown_state_filters`. Kafka
  filters the list by DESCRIBE on each transactional id; an empty list needs no check.
- WriteTxnMarkers (API 27, v1; `abort_transaction` of the admin clients, and Kafka's own
  coordinators): CLUSTER_ACTION on the cluster, as Kafka asks; then each partition
  INVALID_TXN_STATE, as no producer here is in a transaction to end (Kafka would write
  the marker).
"""

from __future__ import annotations

from typing import Any

from broker.kafka import authz
from broker.kafka import response_shapes as shapes
from broker.kafka.context import BrokerContext
from raft.common.errors import ErrorCode

# org.apache.kafka.clients.admin.TransactionState's names
TRANSACTION_STATES = frozenset({"Ongoing", "PrepareAbort", "PrepareCommit", "CompleteAbort",
                                "CompleteCommit", "Dead", "Empty", "PrepareEpochFence"})


async def handle_list_transactions_request(context: BrokerContext, request: Any,
                                           version: int) -> shapes.ListTransactionsResponse:
    return {"throttle_time": 0, "error_code": 0, "transaction_states": [],
            "unknown_state_filters": [s for s in request.state_filters
                                      if s not in TRANSACTION_STATES]}


async def handle_write_txn_markers_request(context: BrokerContext, request: Any,
                                           version: int) -> shapes.WriteTxnMarkersResponse:
    error = ErrorCode.INVALID_TXN_STATE if authz.cluster_allowed(
        context, authz.Op.CLUSTER_ACTION) else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return {"markers": [
        {"producer_id": int(marker.producer_id), "topics": [
            {"name": topic.name, "partitions": [
                {"partition_index": int(p), "error_code": int(error)}
                for p in topic.partition_indexes]}
            for topic in marker.topics]}
        for marker in request.markers]}
