"""`cdcctl playground up|down|status`: a private local cluster for trying the product.

`up` starts etcd, a source and a downstream MariaDB (cdc.playground), then one
`cdc-server` attached to that etcd, and prints how to reach each of them;
`up --kafka` also starts a Kafka-protocol broker (Tansu, cdc.playground.kafka).
Everything lives under `.cdc-playground/` (git-ignored); `down` stops only
what `up` started, by pid file.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cdc.cli import exitcodes
from cdc.cli.output import emit, error
from cdc.playground.errors import ServiceError
from cdc.playground.kafka import DEFAULT_PORT as KAFKA_PORT
from cdc.playground.kafka import playground_broker
from cdc.playground.server import DEFAULT_PORT, ServerProcess

if TYPE_CHECKING:
    from cdc.playground.local import LocalServices, PlaygroundPorts

# ``cdc.playground.local`` (the servers' machinery, the etcd client) is imported where it
# is used: the other cdcctl commands start without it.


def register(commands: argparse._SubParsersAction) -> None:
    playground = commands.add_parser(
        "playground", help="local etcd + source/downstream MariaDB + cdc-server for trying it out"
    )
    playground.add_argument(
        "--base-dir", type=Path, default=None, help="data folder (default .cdc-playground)"
    )
    sub = playground.add_subparsers(dest="playground_command", metavar="COMMAND", required=True)
    up = sub.add_parser("up", help="start what is not running (idempotent) and print endpoints")
    up.add_argument("--source-port", type=int, default=3316)
    up.add_argument("--downstream-port", type=int, default=3317)
    up.add_argument("--etcd-port", type=int, default=2389)
    up.add_argument("--etcd-peer-port", type=int, default=2390)
    up.add_argument("--server-port", type=int, default=DEFAULT_PORT, help="cdc-server admin port")
    up.add_argument(
        "--console-port", type=int, help="cdc-server's web console (default: --server-port + 1)"
    )
    up.add_argument(
        "--kafka", action="store_true", help="also a Kafka broker (Tansu, in memory) for kafka://"
    )
    up.add_argument("--kafka-port", type=int, default=KAFKA_PORT)
    up.set_defaults(run=_up)
    sub.add_parser("down", help="stop what `up` started (data is kept)").set_defaults(run=_down)
    sub.add_parser("status", help="what runs, where").set_defaults(run=_status)


def _services(args: argparse.Namespace, ports: PlaygroundPorts | None = None) -> LocalServices:
    from cdc.playground.local import LocalServices

    return LocalServices(args.base_dir, ports)


def _server(
    args: argparse.Namespace,
    etcd_endpoint: str,
    port: int | None = None,
    http_port: int | None = None,
) -> ServerProcess:
    return ServerProcess(_base(args) / "server", etcd_endpoint, port, http_port)


def _up(args: argparse.Namespace) -> int:
    from cdc.playground.local import PlaygroundPorts

    try:
        ports = PlaygroundPorts(
            source=args.source_port,
            downstream=args.downstream_port,
            etcd_client=args.etcd_port,
            etcd_peer=args.etcd_peer_port,
        )
        services = _services(args, ports)
        state = services.up()
        etcd = state["services"]["etcd"]["endpoint"]
        server = _server(args, etcd, args.server_port, args.console_port)
        server.start()
        summary = _summary(state, server)
        if args.kafka:
            broker = playground_broker(_base(args), args.kafka_port)
            broker.start()
            summary["kafka"] = {
                "bootstrap": broker.bootstrap,
                "sink-uri": f"kafka://{broker.bootstrap}/cdc-events?protocol=canal-json",
                "log": str(broker.log_path),
            }
    except ServiceError as exc:
        error(str(exc))
        return exitcodes.FAILED
    emit(summary, args.output)
    return exitcodes.OK


def _base(args: argparse.Namespace) -> Path:
    from cdc.playground.local import default_base_dir

    return Path(args.base_dir or default_base_dir()).absolute()


def _summary(state: dict[str, Any], server: ServerProcess) -> dict[str, Any]:
    """What `up` prints: endpoints with passwords masked; the passwords stay in state.json."""
    services = state["services"]
    out: dict[str, Any] = {
        "base_dir": state["base_dir"],
        "credentials": str(Path(state["base_dir"]) / "state.json"),
    }
    for name in ("source", "downstream"):
        db = services[name]
        uri = f"mysql://{db['user']}:******@{db['host']}:{db['port']}/"
        out[name] = {
            "uri": uri,
            "shell": f"mariadb -h {db['host']} -P {db['port']} -u {db['user']} -p",
            "log": db["log"],
        }
    out["etcd"] = {"endpoint": services["etcd"]["endpoint"], "log": services["etcd"]["log"]}
    out["cdc-server"] = server.describe()
    out["next"] = [
        f"open the console: {server.describe()['console']}",
        f"cdcctl capture list --etcd {services['etcd']['endpoint']}",
        "cdcctl playground status",
        "cdcctl playground down",
    ]
    return out


def _down(args: argparse.Namespace) -> int:
    try:
        services = _services(args)
        stopped = []
        server = _server(args, services.etcd.endpoint)
        if server.stop():
            stopped.append("cdc-server")
        broker = playground_broker(_base(args))
        if broker.is_running():
            broker.stop()
            stopped.append("kafka")
        stopped += services.down()
    except ServiceError as exc:
        error(str(exc))
        return exitcodes.FAILED
    emit({"stopped": stopped}, args.output)
    return exitcodes.OK


def _status(args: argparse.Namespace) -> int:
    try:
        services = _services(args)
        status = services.status()
        status["services"]["cdc-server"] = _server(args, services.etcd.endpoint).describe()
        broker = playground_broker(_base(args))
        status["services"]["kafka"] = {
            "running": broker.is_running(),
            "bootstrap": broker.bootstrap,
        }
    except ServiceError as exc:
        error(str(exc))
        return exitcodes.FAILED
    emit(status, args.output)
    return exitcodes.OK
