"""The blocking client for requests that must reach the quorum's leader: the
controllers' admin RPCs (`metadata.admin`) and raft's own (`Append`, `DescribeQuorum`).

One attempt is `exchange`: a msgpack frame out on a connection of its own, its answer
back. It says whether the request left this client (`ExchangeError.sent`): a refused
connection is safe to retry, a timeout after the frame went out is not known to have
failed. Whom to ask next, when to pause and what the call's end means are decided by
`raft.common.leader_redirect` alone; `classify` turns a reply into that policy's outcome
(`admin_outcome`: NOT_CONTROLLER names the leader; `raft_outcome`:
NOT_LEADER_OR_FOLLOWER does). `AdminClient` is the admin verbs' (and the benches'):
one deadline per client, a refusal raised as the `CommandError` a verb prints; when
every address refused the connection in turn, nothing listens there (a stopped
cluster, a wrong port) and it fails at once instead of waiting out the deadline.

TLS is explicit: an attempt dials with the context it is given (None: plaintext).
"""

from __future__ import annotations

import math
import socket
import ssl
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import count
from typing import Any

from metadata.admin import (
    WRITE_APIS,
    AdminDecodeError,
    AdminErrorResponse,
    api_of,
    decode_response,
    encode_body,
)
from raft.common import leader_redirect
from raft.common.errors import ErrorCode
from raft.common.framing import FrameDecoder, FrameError, encode_frame
from raft.common.leader_redirect import (
    Answered,
    Done,
    Failed,
    Lost,
    Outcome,
    Redirected,
    Unknown,
)
from tools.config_basics import ConfigError, parse_address
from tools.errors import CommandError, usage_error

Classify = Callable[[str, Any], Outcome]  # (address, reply body) -> the attempt's outcome
_correlation = count(1)
ADMIN_BACKOFF_S = 0.1
ADMIN_ATTEMPT_TIMEOUT_S = 10.0


class ExchangeError(Exception):
    """One request got no answer; `sent`: the frame may have reached the node;
    `refused`: the address refused the connection (nothing listens there)."""

    def __init__(self, message: str, *, sent: bool, refused: bool = False) -> None:
        super().__init__(message)
        self.sent = sent
        self.refused = refused


@dataclass(frozen=True, slots=True)
class AllRefused(Failed):
    """Every address refused the connection, one after another: nobody listens."""


def _connect(target: tuple[str, int], timeout_s: float,
             ssl_context: ssl.SSLContext | None) -> socket.socket:
    sock = socket.create_connection(target, timeout=timeout_s)
    if ssl_context is None:
        return sock
    # The handshake's flights are several small writes: with Nagle's algorithm each waits
    # for the server's delayed ACK (40 ms on Linux, measured: 48 ms a handshake, 6 without)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        return ssl_context.wrap_socket(sock, server_hostname=target[0])
    except BaseException:
        sock.close()
        raise


def exchange(address: str, api: str, body: Any, *, cluster_id: str = "",
             timeout_s: float = 5.0, ssl_context: ssl.SSLContext | None = None) -> Any:
    """Send one request frame and return the response body (ExchangeError on failure)."""
    correlation_id = next(_correlation)
    frame = encode_frame({"api": api, "version": 0, "correlation_id": correlation_id,
                          "cluster_id": cluster_id, "body": body})
    deadline = time.monotonic() + timeout_s
    try:
        target = parse_address(address)
    except ConfigError as exc:
        raise ExchangeError(exc.detail, sent=False) from None
    sent = False
    try:
        with _connect(target, timeout_s, ssl_context) as sock:
            sent = True  # from the first byte on, the node may act on it
            sock.sendall(frame)
            decoder = FrameDecoder()
            while True:
                sock.settimeout(max(0.001, deadline - time.monotonic()))
                data = sock.recv(65536)
                if not data:
                    raise ExchangeError(f"{address} closed the connection" + (
                        "" if ssl_context is not None else " (an SSL listener closes a "
                        "plaintext client: give --command-config FILE, or --cluster DIR of "
                        "a TLS cluster)"), sent=True)
                for reply in decoder.feed(data):
                    if reply["correlation_id"] == correlation_id:
                        return reply["body"]
    except TimeoutError:
        raise ExchangeError(f"{address}: no answer to {api} within {timeout_s} s",
                            sent=sent) from None
    except FrameError as exc:
        raise ExchangeError(f"{address}: unreadable answer to {api}: {exc}",
                            sent=True) from None
    except OSError as exc:
        raise ExchangeError(f"{address}: {exc.strerror or exc}", sent=sent,
                            refused=isinstance(exc, ConnectionRefusedError)) from None


def problems_text(problems: Iterable[str]) -> str:
    """A call's problems as one line, each once in the order first met: a call that went
    round the addresses until its deadline met the same few again and again."""
    return "; ".join(dict.fromkeys(problems))


# -- classifiers: a reply as the policy's outcome --------------------------------------


def admin_outcome(api: str, *, on_malformed: Callable[[str, AdminDecodeError], Outcome]
                  | None = None) -> Classify:
    """A controller's admin reply: NOT_CONTROLLER redirects to the leader it names; any
    other answer (a refusal included) is the decoded response. An unreadable reply is
    `Lost` (it came from something that read the request), unless `on_malformed` says
    otherwise (it may raise)."""
    def classify(address: str, reply: Any) -> Outcome:
        try:
            response = decode_response(api, reply)
        except AdminDecodeError as exc:
            if on_malformed is not None:
                return on_malformed(address, exc)
            return Lost(f"{address}: malformed {api} response: {exc}")
        if isinstance(response, AdminErrorResponse) and \
                response.top_level_error == ErrorCode.NOT_CONTROLLER:
            hint = response.leader_address or None
            return Redirected(hint, f"{address}: {response.error_message}")
        return Answered(response)
    return classify


def raft_outcome(address: str, reply: Any) -> Outcome:
    """A raft RPC's reply (Append, DescribeQuorum): NOT_LEADER_OR_FOLLOWER redirects to
    the `leader_address` it names; anything else is the answer, as sent."""
    if isinstance(reply, dict) and \
            reply.get("error_code", 0) == ErrorCode.NOT_LEADER_OR_FOLLOWER:
        hint = reply.get("leader_address")
        return Redirected(hint if isinstance(hint, str) and hint else None,
                          f"{address}: {reply.get('error_message', 'not the leader')}")
    return Answered(reply)


# -- the client ------------------------------------------------------------------------


class LeaderClient:
    """Sends each call to the leader among `addresses` as `raft.common.leader_redirect`
    decides, remembering the leader between calls. `attempt_timeout_s` bounds one
    attempt; `max_rounds` bounds the rounds over the addresses (None: until the
    call's deadline). `refusals_end_call`: `AllRefused` as soon as every address
    refused the connection since the last attempt that reached a node."""

    def __init__(self, addresses: Iterable[str], *, cluster_id: str = "",
                 ssl_context: ssl.SSLContext | None = None, attempt_timeout_s: float = 10.0,
                 backoff_s: float = 0.1, max_rounds: int | None = None,
                 avoid: Iterable[str] = (), refusals_end_call: bool = False) -> None:
        self.addresses = list(addresses)
        self.refusals_end_call = refusals_end_call
        self.cluster_id = cluster_id
        self.ssl_context = ssl_context  # None: plaintext
        self.attempt_timeout_s = attempt_timeout_s
        self.backoff_s = backoff_s
        self.max_rounds = max_rounds
        self.avoid = frozenset(avoid)
        self.preferred: str | None = None

    def call(self, api: str, body: Any, *, classify: Classify, is_write: bool,
             deadline: float | None = None) -> Done[str] | Unknown | Failed:
        """`Done` with the answer, or how the call ended without one. `deadline`:
        `time.monotonic()` at which to give up (None: `max_rounds` bounds the call)."""
        call = leader_redirect.start(self.addresses, is_write=is_write,
                                     backoff_s=self.backoff_s, preferred=self.preferred,
                                     max_rounds=self.max_rounds, avoid=self.avoid)
        outcome: Outcome | None = None
        targets = set(self.addresses) - self.avoid
        refused: set[str] = set()
        while True:
            time_left = math.inf if deadline is None else deadline - time.monotonic()
            call, decision = leader_redirect.decide(call, outcome, time_left)
            if isinstance(decision, leader_redirect.Send):
                outcome, was_refused = self._attempt(decision.address, api, body, classify,
                                                     min(self.attempt_timeout_s, time_left))
                refused = refused | {decision.address} if was_refused else set()
                if self.refusals_end_call and targets and refused >= targets:
                    return AllRefused((f"every address refused the connection: "
                                       f"{', '.join(sorted(refused))}",))
            elif isinstance(decision, leader_redirect.Backoff):
                time.sleep(decision.seconds)  # no controller is active: an election
                outcome = None
            else:
                self.preferred = decision.leader if isinstance(decision, Done) \
                    else call.preferred
                return decision

    def _attempt(self, address: str, api: str, body: Any, classify: Classify,
                 timeout_s: float) -> tuple[Outcome, bool]:
        """The attempt's outcome, and whether the address refused the connection."""
        try:
            reply = exchange(address, api, body, cluster_id=self.cluster_id,
                             timeout_s=timeout_s, ssl_context=self.ssl_context)
        except ExchangeError as exc:
            outcome = Lost(str(exc)) if exc.sent else leader_redirect.Unsent(str(exc))
            return outcome, exc.refused
        return classify(address, reply), False


class AdminClient:
    """Blocking admin client: tries each address, follows NOT_CONTROLLER to the leader and
    retries (with a short backoff) while no controller is active, until the deadline
    (`LeaderClient`). Over TLS with `ssl_context`."""

    def __init__(self, addresses: list[str], *, cluster_id: str = "", timeout_s: float = 30.0,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        if not addresses:
            raise usage_error("no controller address given")
        self.addresses = addresses
        self.deadline = time.monotonic() + timeout_s
        # the last call's answer came after an attempt of it that may have been applied
        self.maybe_applied_before = False
        self._client = LeaderClient(addresses, cluster_id=cluster_id, ssl_context=ssl_context,
                                    attempt_timeout_s=ADMIN_ATTEMPT_TIMEOUT_S,
                                    backoff_s=ADMIN_BACKOFF_S, refusals_end_call=True)

    @property
    def preferred(self) -> str | None:
        """The controller that answered last (asked first next time)."""
        return self._client.preferred

    def call(self, request_message: Any) -> Any:
        api = api_of(request_message)
        result = self._client.call(api, encode_body(request_message),
                                   is_write=api in WRITE_APIS, deadline=self.deadline,
                                   classify=admin_outcome(api, on_malformed=_malformed(api)))
        if isinstance(result, AllRefused):
            raise CommandError(f"{api}: {result.problems[0]} (is the cluster running?)")
        if isinstance(result, Unknown | Failed):
            last = result.problems[-1] if result.problems else "no answer"
            applied = f"; the {api} may have been applied" \
                if isinstance(result, Unknown) else ""
            raise CommandError(f"no active controller answered {api} in time{applied} "
                               f"({last})")
        response = result.value
        self.maybe_applied_before = result.maybe_applied_before
        if isinstance(response, AdminErrorResponse):
            raise CommandError(f"{api} failed: " + describe_error(
                response.top_level_error, response.error_message))
        return response


def _malformed(api: str) -> Callable[[str, AdminDecodeError], Outcome]:
    def refuse(address: str, exc: AdminDecodeError) -> Outcome:
        raise CommandError(f"{address}: malformed {api} response: {exc}")
    return refuse


def describe_error(code: int, message: str | None) -> str:
    """An error code as `NAME (code): message`, as the verbs print it."""
    try:
        name = ErrorCode(code).name
    except ValueError:
        name = "UNKNOWN"
    return f"{name} ({code})" + (f": {message}" if message else "")


CREATE_DONE_ALREADY = ErrorCode.TOPIC_ALREADY_EXISTS  # a retried create's proof
GROW_DONE_ALREADY = ErrorCode.INVALID_PARTITIONS  # a retried create-partitions' proof


def may_prove_applied(code: int, requested: int | None, proof: ErrorCode) -> bool:
    """Whether a retried topic write's refusal could prove that an earlier attempt of it,
    of unknown outcome, was applied: the write's own `proof` code (TOPIC_ALREADY_EXISTS to
    a create, INVALID_PARTITIONS to a create-partitions) to a write that asked for a
    partition count (a create without one proves nothing: the controller chose it). A
    create refused INVALID_PARTITIONS is refused: its count is wrong."""
    return code == proof and requested is not None


def earlier_attempt_applied(code: int, *, requested: int | None, proof: ErrorCode,
                            partitions_now: int) -> bool:
    """Whether it does: the topic now has the `requested` partition count."""
    return may_prove_applied(code, requested, proof) and partitions_now == requested


def fail_on_error(what: str, code: int, message: str | None) -> None:
    if code != ErrorCode.NONE:
        raise CommandError(f"{what} failed: {describe_error(code, message)}")
