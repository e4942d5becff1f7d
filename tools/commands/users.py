"""`kraft users`: SCRAM credentials of users (kafka-configs.sh --entity-type users).

    kraft users (--cluster DIR | --bootstrap-server HOST:PORT | --bootstrap-controller HOST:PORT)
        (--describe [--entity-name NAME ...]
         | --alter --entity-name NAME
               [--add-config 'SCRAM-SHA-256=[iterations=8192,password=PW],...']
               [--delete-config 'SCRAM-SHA-256,SCRAM-SHA-512'])
        [--entity-type users] [--command-config FILE] [--json] [--timeout SECONDS]

The password never leaves this process: it is salted (32 random bytes) and hashed here
(PBKDF2, `iterations`, default 4096 as Kafka's). Through a broker (`--bootstrap-server`,
Kafka's AlterUserScramCredentials v0, KIP-554) the salted password travels, and the
broker turns it into the two keys a SCRAM server keeps; to the controllers
(`--cluster`, `--bootstrap-controller`) the two keys travel themselves
(`metadata.admin.ScramCredentialUpsertion`). Either way the metadata log holds the salt,
the iteration count, StoredKey and ServerKey. A broker's listener that requires SASL
takes `--command-config` with `security.protocol=SASL_PLAINTEXT`, `sasl.mechanism` and
`sasl.jaas.config`, as Kafka's tools do.

`parse_scram_configs` also reads `kraft format --add-scram` (kafka-storage.sh's
`SCRAM-SHA-256=[name=alice,password=alice-secret]`). A refusal exits 1 with Kafka's
error name (e.g. RESOURCE_NOT_FOUND deleting a credential that does not exist); bad
usage exits 2.
"""

from __future__ import annotations

import argparse
import json
import secrets
from collections.abc import Sequence
from typing import Any

from broker.kafka.sasl.scram import MECHANISMS, credential_from_password, make_salt, salted_password
from metadata.admin import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
    ScramCredentialDeletion,
    ScramCredentialInfo,
    ScramCredentialUpsertion,
)
from metadata.scram_credentials import MECHANISM_BY_TYPE, SCRAM_MECHANISMS
from tools.admin_client import fail_on_error
from tools.commands.configs import parse_add_config
from tools.commands.topics import add_controller_target, admin_client, through_broker
from tools.errors import CommandError, usage_error

DEFAULT_ITERATIONS = 4096  # kafka-configs.sh's default
DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS = 50, 51


def configure(parser: argparse.ArgumentParser, verb: str) -> None:
    add_controller_target(parser, brokers=True)
    parser.add_argument("--entity-type", choices=("users",), default="users",
                        help="only users (kafka-configs.sh's --entity-type users)")
    parser.add_argument("--entity-name", action="append", default=[], metavar="NAME",
                        help="the user (--describe: may repeat; none: every user)")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true",
                        help="list users' SCRAM mechanisms and iterations")
    action.add_argument("--alter", action="store_true", help="add or delete credentials")
    parser.add_argument("--add-config", default="", metavar="MECHANISM=[password=PW,...]",
                        help="e.g. 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'")
    parser.add_argument("--delete-config", default="", metavar="MECHANISM[,MECHANISM]",
                        help="with --alter: the SCRAM credentials to remove")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS")


def parse_scram_configs(text: str, *, option: str, need: Sequence[str],
                        allowed: Sequence[str]) -> list[tuple[str, dict[str, str]]]:
    """`SCRAM-SHA-256=[k=v,...],SCRAM-SHA-512=[...]` -> [(mechanism, {k: v})]; every
    key of `need` present, none outside `allowed`; a usage error otherwise (never
    echoing a password)."""
    found: list[tuple[str, dict[str, str]]] = []
    for mechanism, inner in parse_add_config(text):
        if mechanism not in SCRAM_MECHANISMS:
            raise usage_error(f"{option}: unknown SCRAM mechanism {mechanism!r} (use "
                              f"{' or '.join(SCRAM_MECHANISMS)})")
        values: dict[str, str] = {}
        for part in (p for p in inner.split(",") if p.strip()):
            key, sep, value = part.partition("=")
            key = key.strip()
            if not sep or key not in allowed:
                raise usage_error(f"{option}: {mechanism}: expected "
                                  f"{', '.join(k + '=...' for k in allowed)}, got "
                                  f"{key or part.split('=')[0]!r}")
            values[key] = value.strip().strip('"')
        missing = [k for k in need if not values.get(k)]
        if missing:
            raise usage_error(f"{option}: {mechanism} needs {' and '.join(missing)}")
        if "iterations" in values:
            if not values["iterations"].isdigit():
                raise usage_error(f"{option}: {mechanism}: iterations must be a number")
        found.append((mechanism, values))
    return found


def upsertion(name: str, mechanism: str, values: dict[str, str]) -> ScramCredentialUpsertion:
    """The salted credential (the admin RPC's form: StoredKey and ServerKey)."""
    iterations = int(values.get("iterations", DEFAULT_ITERATIONS))
    salt = make_salt(secrets.SystemRandom())
    credential = credential_from_password(MECHANISMS[mechanism], values["password"],
                                          salt=salt, iterations=iterations)
    return ScramCredentialUpsertion(name=name, mechanism=mechanism, iterations=iterations,
                                    salt=salt, stored_key=credential.stored_key,
                                    server_key=credential.server_key)


def run(args: argparse.Namespace) -> int:
    names: list[str] = args.entity_name
    if args.alter:
        if len(names) != 1:
            raise usage_error("--alter needs one --entity-name")
        adds = parse_scram_configs(args.add_config, option="--add-config",
                                   need=("password",), allowed=("iterations", "password"))
        deletes = [m.strip() for m in args.delete_config.split(",") if m.strip()]
        unknown = [m for m in deletes if m not in SCRAM_MECHANISMS]
        if unknown:
            raise usage_error(f"--delete-config: unknown SCRAM mechanism {unknown[0]!r}")
        if not (adds or deletes):
            raise usage_error("--alter needs --add-config or --delete-config")
        return _alter(args, names[0], adds, deletes)
    if args.add_config or args.delete_config:
        raise usage_error("--add-config and --delete-config go with --alter")
    return _describe(args, names)


def _alter(args: argparse.Namespace, name: str, adds: list[tuple[str, dict[str, str]]],
           deletes: list[str]) -> int:
    upsertions = tuple(upsertion(name, mechanism, values) for mechanism, values in adds)
    deletions = tuple(ScramCredentialDeletion(name=name, mechanism=m) for m in deletes)
    request = AlterUserScramCredentialsRequest(deletions=deletions, upsertions=upsertions)
    if through_broker(args):
        passwords = {mechanism: values["password"] for mechanism, values in adds}
        response = _alter_through_broker(args, request, passwords)
    else:
        response = admin_client(args).call(request)
    assert isinstance(response, AlterUserScramCredentialsResponse)
    for result in response.results:
        fail_on_error(f"altering the SCRAM credentials of user {result.user!r}",
                      result.error_code, result.error_message)
    print(json.dumps({"user": name, "altered": True}) if args.json
          else f"Completed updating config for user {name}.")
    return 0


def _describe(args: argparse.Namespace, names: list[str]) -> int:
    request = DescribeUserScramCredentialsRequest(users=tuple(names) or None)
    if through_broker(args):
        response = _describe_through_broker(args, request)
    else:
        response = admin_client(args).call(request)
    assert isinstance(response, DescribeUserScramCredentialsResponse)
    fail_on_error("describing SCRAM credentials", response.error_code, response.error_message)
    for result in response.results:
        fail_on_error(f"describing the SCRAM credentials of user {result.user!r}",
                      result.error_code, result.error_message)
    if args.json:
        print(json.dumps({"users": [
            {"user": r.user, "credentials": [
                {"mechanism": c.mechanism, "iterations": c.iterations}
                for c in r.credential_infos]} for r in response.results]}))
        return 0
    for r in response.results:
        infos = ", ".join(f"{c.mechanism}=iterations={c.iterations}" for c in r.credential_infos)
        print(f"SCRAM credential configs for user-principal '{r.user}' are {infos}")
    return 0


# --- through a broker (Kafka's protocol: the salted password travels) -----------------


def _broker_client(args: argparse.Namespace) -> Any:
    from tools.addresses import broker_addresses
    from tools.client.admin import BrokerAdminClient  # kio and trio: only when used
    return BrokerAdminClient(broker_addresses(None, args.bootstrap_server),
                             ssl_context=args.client_ssl, sasl=args.client_sasl,
                             timeout_s=args.timeout)


def _alter_through_broker(args: argparse.Namespace, request: AlterUserScramCredentialsRequest,
                          passwords: dict[str, str]) -> AlterUserScramCredentialsResponse:
    upsertions = []
    for u in request.upsertions:  # Kafka's form: the salted password, not the keys
        salted = salted_password(MECHANISMS[u.mechanism], passwords[u.mechanism], u.salt,
                                 u.iterations)
        upsertions.append({"name": u.name, "mechanism": SCRAM_MECHANISMS[u.mechanism][0],
                           "iterations": u.iterations, "salt": u.salt,
                           "salted_password": salted})
    values = {"deletions": [{"name": d.name, "mechanism": SCRAM_MECHANISMS[d.mechanism][0]}
                            for d in request.deletions], "upsertions": upsertions}
    response = _broker_call(args, ALTER_USER_SCRAM_CREDENTIALS, values)
    return AlterUserScramCredentialsResponse(results=tuple(
        AlterUserScramCredentialsResult(user=r.user, error_code=int(r.error_code),
                                        error_message=r.error_message)
        for r in response.results))


def _describe_through_broker(args: argparse.Namespace,
                             request: DescribeUserScramCredentialsRequest
                             ) -> DescribeUserScramCredentialsResponse:
    users = None if request.users is None else [{"name": n} for n in request.users]
    response = _broker_call(args, DESCRIBE_USER_SCRAM_CREDENTIALS, {"users": users})
    return DescribeUserScramCredentialsResponse(
        error_code=int(response.error_code), error_message=response.error_message,
        results=tuple(DescribeUserScramCredentialsResult(
            user=r.user, error_code=int(r.error_code), error_message=r.error_message,
            credential_infos=tuple(ScramCredentialInfo(
                mechanism=MECHANISM_BY_TYPE.get(int(c.mechanism), "UNKNOWN"),
                iterations=int(c.iterations)) for c in r.credential_infos))
            for r in response.results))


def _broker_call(args: argparse.Namespace, api_key: int, values: dict[str, Any]) -> Any:
    from raft.common.kafka.wire_client import CLOSED_BY_PEER
    from tools.client.connection import ClientError
    client = _broker_client(args)
    try:
        return client.run(lambda admin: admin.send(api_key, values, version=0))
    except ClientError as exc:
        hint = ""
        if CLOSED_BY_PEER in str(exc) and args.client_sasl is None:
            hint = (" (a SASL listener closes a connection that has not logged in: give "
                    "--command-config with security.protocol=SASL_PLAINTEXT, sasl.mechanism "
                    "and sasl.jaas.config)")
        raise CommandError(f"--bootstrap-server {args.bootstrap_server}: {exc}{hint}") \
            from None
