"""Real processes started from Kafka-style `server.properties` files: a controller, and
a broker that knows the controllers only by `controller.quorum.bootstrap.servers`; then
a second `kraft node` on the controller's live directory, refused by its lock before it
touches anything while the first goes on."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.quorum_support import kraft, wait_until
from tools.ports import free_ports

pytestmark = pytest.mark.integration
CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
FAST = """controller.quorum.election.timeout.ms=300
controller.quorum.fetch.timeout.ms=600
controller.quorum.election.backoff.max.ms=200
controller.quorum.request.timeout.ms=400
"""


def controller_properties(data: Path, port: int) -> str:
    return f"""# The role of this server. Setting this puts us in KRaft mode
process.roles=controller

# The node id associated with this instance's roles
node.id=1

# The connect string for the controller quorum
controller.quorum.voters=1@127.0.0.1:{port}

############################# Socket Server Settings #############################
listeners=CONTROLLER://127.0.0.1:{port}
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,\\
    SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600

############################# Log Basics #############################
log.dirs={data}
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
{FAST}"""


def broker_properties(data: Path, controller_port: int, port: int) -> str:
    return f"""process.roles=broker
node.id=2
controller.quorum.bootstrap.servers=127.0.0.1:{controller_port}
listeners=PLAINTEXT://127.0.0.1:{port}
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs={data}
num.partitions=1
{FAST}broker.heartbeat.interval.ms=200
"""


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    processes: list[subprocess.Popen[bytes]] = []
    yield processes
    for process in processes:  # by PID, whatever happened
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def start_node(config: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen([sys.executable, "-m", "tools.cli", "node", "--config",
                                 str(config)], stdout=out, stderr=subprocess.STDOUT)


def describe(address: str) -> dict[str, object] | None:
    result = kraft("quorum", "describe", "--bootstrap-controller", address, "--status",
                   "--json")
    return json.loads(result.stdout) if result.returncode == 0 else None


def test_properties_files_start_a_controller_and_a_broker_and_the_lock_guards_the_dir(
        tmp_path: Path, started: list[subprocess.Popen[bytes]]) -> None:
    controller_port, broker_port = free_ports(2)
    address = f"127.0.0.1:{controller_port}"
    controller = tmp_path / "controller.properties"
    controller.write_text(controller_properties(tmp_path / "c1", controller_port))
    broker = tmp_path / "broker.properties"
    broker.write_text(broker_properties(tmp_path / "b2", controller_port, broker_port))
    for config in (controller, broker):
        assert kraft("format", "--config", str(config), "--cluster-id",
                     CLUSTER_ID).returncode == 0
    started.append(start_node(controller, tmp_path / "c1.log"))
    wait_until(lambda: (describe(address) or {}).get("LeaderId") == 1, 30, "a leader")
    started.append(start_node(broker, tmp_path / "b2.log"))
    wait_until(lambda: {"id": 2} in (describe(address) or {}).get("CurrentObservers", []),
               30, "the broker fetching as an observer")
    log = (tmp_path / "c1.log").read_text()
    assert "ignored (no effect in kraft-py): num.io.threads" in log
    assert "INFO    raft.node: node started" in log  # kraft node logs at INFO by default
    assert "voters learned from controller.quorum.bootstrap.servers" in \
        (tmp_path / "b2.log").read_text()

    segment = tmp_path / "c1" / "__cluster_metadata-0" / "00000000000000000000.log"
    before = segment.read_bytes()
    second = kraft("node", "--config", str(controller), timeout=60)
    assert second.returncode == 2
    errors = [line for line in second.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1  # after the ignored-keys warning
    assert "Traceback" not in second.stderr
    assert f"is in use by another process (pid {started[0].pid}" in errors[0]
    # Untouched by the second process: the live node may append (the broker's
    # registration and heartbeats commit records), but nothing it wrote was cut.
    assert segment.read_bytes().startswith(before)
    assert started[0].poll() is None
    appended = kraft("quorum", "append", "--bootstrap-controller", address, "--count", "5",
                     "--json")
    assert appended.returncode == 0, appended.stderr
    assert (describe(address) or {}).get("LeaderId") == 1
