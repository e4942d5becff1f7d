"""kraft metadata-shell: /image/acls/byId/<acl id> shows each ACL with Kafka's names for
its codes."""

from __future__ import annotations

import json

from metadata import records as rec
from raft.common.uuid import Uuid
from tests.unit.tools.test_metadata_shell import run, shell_of


def test_acls_are_files_by_id_when_set() -> None:
    shell = shell_of([rec.AccessControlEntry(
        id=Uuid(7), resource_type=2, resource_name="pay", pattern_type=4,
        principal="User:bob", host="*", operation=4, permission_type=2)])
    assert run(shell, "ls /image/acls/byId") == (str(Uuid(7)),)
    shown = json.loads("\n".join(run(shell, f"cat /image/acls/byId/{Uuid(7)}")))
    assert shown == {"id": str(Uuid(7)), "resource_type": "TOPIC", "resource_name": "pay",
                     "pattern_type": "PREFIXED", "principal": "User:bob", "host": "*",
                     "operation": "WRITE", "permission_type": "DENY"}


def test_acls_directory_is_empty_when_there_are_none() -> None:
    assert run(shell_of([rec.NoOp()]), "ls /image/acls/byId") == ()
