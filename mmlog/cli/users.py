"""Manage SCRAM users: set a password, describe, delete (kafka-configs.sh --entity-type users).

    mmlog users set NAME [--mechanism SCRAM-SHA-512] [--iterations 4096] [--password-file F]
    mmlog users describe [NAME ...]
    mmlog users delete NAME [--mechanism SCRAM-SHA-512]

Through a broker (AlterUserScramCredentials / DescribeUserScramCredentials): the
password is salted here and never sent. `--command-config FILE` gives the client's
security settings in Kafka's property names (security.protocol, sasl.mechanism,
sasl.jaas.config, ssl.truststore.location, ...). The first user of a broker whose
every listener needs SASL cannot be made that way: `--data-dir DIR` writes a
standalone broker's credential store directly (stop the broker first or not: it
re-reads the file), `--zookeeper HOST:PORT[/chroot]` a cluster's /config/users.
The password is read from --password-file, or from stdin (one line), never from
the command line, where `ps` would show it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mmlog.security import credentials, scram
from mmlog.cli import BOOTSTRAP, COMMAND_CONFIG, TIMEOUT, CommandError, add_subcommands, client_security

MECHANISMS = tuple(scram.MECHANISMS)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    command = add_subcommands(parser, [BOOTSTRAP, TIMEOUT, COMMAND_CONFIG], dest="action", metavar="set|describe|delete",
                              required=True)
    for sub in (command("set", help="create a user or change its password (read from stdin)"),
                command("describe", help="users and their SCRAM mechanisms"),
                command("delete", help="delete a user's credential for one mechanism")):
        sub.add_argument("--data-dir", metavar="DIR", help="write a standalone broker's store directly")
        sub.add_argument("--zookeeper", metavar="HOST:PORT", help="write a cluster's /config/users directly")
        if sub.prog.endswith("describe"):
            sub.add_argument("names", nargs="*", metavar="NAME")
            continue
        sub.add_argument("name", metavar="NAME")
        sub.add_argument("--mechanism", choices=MECHANISMS, default="SCRAM-SHA-512")
        if sub.prog.endswith("set"):
            sub.add_argument("--iterations", type=int, default=scram.MIN_ITERATIONS)
            sub.add_argument("--password-file", metavar="FILE", help="read the password from FILE (else stdin)")


def run(args: argparse.Namespace) -> int:
    password = _password(args) if args.action == "set" else None
    if args.action == "set" and not scram.MIN_ITERATIONS <= args.iterations <= scram.MAX_ITERATIONS:
        raise CommandError(f"--iterations must be within {scram.MIN_ITERATIONS}..{scram.MAX_ITERATIONS}")
    if args.data_dir or args.zookeeper:
        return _direct(args, password)
    from mmlog.client import Admin

    with Admin(args.bootstrap, timeout=args.timeout, **client_security(args)) as admin:
        if args.action == "set":
            admin.set_user_password(args.name, password, args.mechanism, args.iterations)
            print(f"set {args.mechanism} credential of user {args.name}")
        elif args.action == "delete":
            admin.delete_user(args.name, args.mechanism)
            print(f"deleted {args.mechanism} credential of user {args.name}")
        else:
            _print(admin.describe_users(args.names or None))
    return 0


def _password(args) -> str:
    text = Path(args.password_file).read_text() if args.password_file else sys.stdin.readline()
    password = text.rstrip("\n")
    if not password:
        raise CommandError("empty password")
    return password


def _print(users: dict[str, dict[str, int]]) -> None:
    for name in sorted(users):
        mechs = ", ".join(f"{m} iterations={i}" for m, i in sorted(users[name].items()))
        print(f"{name}\t{mechs}")


def _direct(args, password: str | None) -> int:
    """Edit the store itself: the data dir's credentials.json, or ZooKeeper's /config/users."""
    if args.zookeeper:
        return _zookeeper(args, password)
    path = credentials.path_in(args.data_dir)
    users = credentials.load(path)
    if args.action == "describe":
        _print({n: {m: scram.ScramCredential.from_kafka(t).iterations for m, t in ms.items()}
                for n, ms in users.items() if not args.names or n in args.names})
        return 0
    if args.action == "set":
        credentials.upsert(users, args.name, args.mechanism, scram.credential(args.mechanism, password,
                                                                              args.iterations))
    elif not credentials.delete(users, args.name, args.mechanism):
        raise CommandError(f"user {args.name} has no {args.mechanism} credential")
    Path(args.data_dir).mkdir(parents=True, exist_ok=True)
    credentials.save(path, users)
    print(f"{args.action} {args.mechanism} credential of user {args.name}: done ({path})")
    return 0


def _zookeeper(args, password: str | None) -> int:
    import json

    from kazoo.client import KazooClient

    zk = KazooClient(hosts=args.zookeeper, timeout=args.timeout)
    zk.start(timeout=args.timeout)
    try:
        if args.action == "describe":
            names = args.names or zk.get_children("/config/users") if zk.exists("/config/users") else []
            _print({n: {m: scram.ScramCredential.from_kafka(t).iterations for m, t in
                        json.loads(zk.get(f"/config/users/{n}")[0]).get("config", {}).items() if m in scram.MECHANISMS}
                     for n in names})
            return 0
        path = f"/config/users/{args.name}"
        doc = json.loads(zk.get(path)[0]) if zk.exists(path) else {"version": 1, "config": {}}
        if args.action == "set":
            doc["config"][args.mechanism] = scram.credential(args.mechanism, password, args.iterations).to_kafka()
        elif doc["config"].pop(args.mechanism, None) is None:
            raise CommandError(f"user {args.name} has no {args.mechanism} credential")
        data = json.dumps(doc, separators=(",", ":")).encode()
        if zk.exists(path):
            zk.set(path, data)
        else:
            zk.create(path, data, makepath=True)
        print(f"{args.action} {args.mechanism} credential of user {args.name}: done (ZooKeeper {path})")
        return 0
    finally:
        zk.stop()
        zk.close()
