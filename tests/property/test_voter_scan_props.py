"""The scan for voter changes in a run of records (`raft.voters._voter_changes`, used on
every appended batch, a log read at start and a loaded snapshot) finds exactly the
records `voters_change_of` takes, at their indexes: the type test runs in C over all of
them, so records that only look like one (the tag, then garbage) must still be refused."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from raft.common.uuid import Uuid
from raft.control_records import Endpoint, KRaftVersionRecord, VotersRecord
from raft.voters import ReplicaKey, Voter, VoterSet, _voter_changes, voters_change_of

_VOTERS = VotersRecord(voters=VoterSet(
    Voter(ReplicaKey(n, Uuid(n + 10)), (Endpoint(name="CONTROLLER", host="127.0.0.1",
                                                  port=9000 + n),))
    for n in (1, 2, 3)).to_record().voters).encode()
_VERSION = KRaftVersionRecord(kraft_version=1).encode()
RECORDS = st.one_of(
    st.sampled_from([_VOTERS, _VERSION, b"", b"\x81"]),
    st.binary(max_size=12),
    st.sampled_from([_VOTERS, _VERSION]).flatmap(  # the tag, then anything
        lambda whole: st.binary(max_size=8).map(lambda tail: whole[:7] + tail)))


@given(st.lists(RECORDS, max_size=30))
def test_the_scan_finds_what_a_record_by_record_look_finds(records: list[bytes]) -> None:
    expected = [(index, change) for index, record in enumerate(records)
                if (change := voters_change_of(record)) is not None]
    assert list(_voter_changes(records)) == expected
