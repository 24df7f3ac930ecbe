"""`cdc-server`: one capture of the cluster.

    cdc-server --etcd 127.0.0.1:2379 --addr 0.0.0.0:8300 [--advertise-addr host:8300]

Registers under a lease in etcd, campaigns for owner, serves the admin
endpoint (gRPC health, reflection, cdc.v1.CaptureService) and runs until
SIGTERM/SIGINT, on which it resigns so another capture takes over at once.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading
import uuid
from collections.abc import Sequence

from capture.server import CaptureServer, PortTakenError, ServerConfig
from cdc.config import ConfigError
from cdc.logs import get_logger, setup_logging
from cdc.store import EtcdConfig, StoreError
from cdc.store.keys import cluster_prefix

EXIT_BAD_INPUT = 2
EXIT_UNAVAILABLE = 3


def build_parser() -> argparse.ArgumentParser:
    env = os.environ.get
    parser = argparse.ArgumentParser(
        prog="cdc-server",
        description="Run one capture of the CDC cluster (owner candidate and processor).",
        epilog="Exit codes: 0 stopped by signal, 2 bad flags, 3 etcd unreachable or port taken.",
    )
    parser.add_argument(
        "--etcd",
        default=env("CDC_ETCD"),
        help="etcd endpoints host:port[,host:port] (env CDC_ETCD)",
    )
    parser.add_argument("--addr", required=True, help="admin gRPC listen address host:port")
    parser.add_argument(
        "--advertise-addr", help="address other captures and cdcctl use (default: --addr)"
    )
    parser.add_argument("--capture-id", help="stable id of this capture (default: host-port-rand)")
    parser.add_argument("--cluster-id", default="default", help="cluster id (etcd key prefix)")
    parser.add_argument("--lease-ttl", type=int, default=10, help="capture lease TTL, seconds")
    parser.add_argument("--etcd-ca", help="CA file: use TLS to etcd")
    parser.add_argument("--etcd-cert", help="client certificate for etcd TLS")
    parser.add_argument("--etcd-key", help="client key for etcd TLS")
    parser.add_argument("--etcd-user", default=env("CDC_ETCD_USER"), help="etcd user")
    parser.add_argument(
        "--etcd-password-env",
        default="CDC_ETCD_PASSWORD",
        help="name of the environment variable holding the etcd password",
    )
    parser.add_argument("--log-level", default="INFO")
    return parser


def config_from_args(args: argparse.Namespace) -> ServerConfig:
    """Validated server config; ConfigError names the flag to fix."""
    if not args.etcd:
        raise ConfigError("--etcd", "no etcd endpoint: pass --etcd host:2379 or set CDC_ETCD")
    if args.lease_ttl < 2:
        raise ConfigError("--lease-ttl", f"must be at least 2 seconds, got {args.lease_ttl}")
    host, sep, port = args.addr.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ConfigError("--addr", f"{args.addr!r} is not host:port, e.g. 127.0.0.1:8300")
    advertise = args.advertise_addr or (
        f"{socket.gethostname()}:{port}" if host in ("0.0.0.0", "[::]") else args.addr
    )
    capture_id = args.capture_id or f"{socket.gethostname()}-{port}-{uuid.uuid4().hex[:6]}"
    password = os.environ.get(args.etcd_password_env) if args.etcd_user else None
    if args.etcd_user and password is None:
        raise ConfigError(
            "--etcd-password-env", f"--etcd-user is set but ${args.etcd_password_env} is not"
        )
    etcd = EtcdConfig(
        endpoints=EtcdConfig.parse_endpoints(args.etcd),
        prefix=cluster_prefix(args.cluster_id),
        ca=args.etcd_ca,
        cert=args.etcd_cert,
        key=args.etcd_key,
        user=args.etcd_user,
        password=password,
    )
    return ServerConfig(
        etcd=etcd,
        listen_addr=args.addr,
        advertise_addr=advertise,
        capture_id=capture_id,
        cluster_id=args.cluster_id,
        lease_ttl=args.lease_ttl,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(args.log_level)
    log = get_logger("cdc-server")
    try:
        config = config_from_args(args)
    except ValueError as exc:
        print(f"cdc-server: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        server = CaptureServer(config)
        server.start()
    except (StoreError, PortTakenError) as exc:
        print(f"cdc-server: error: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    stopping = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        log.info("received %s, shutting down", signal.Signals(signum).name)
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    stopping.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
