"""`cdc-server`: one capture of the cluster.

    cdc-server --etcd 127.0.0.1:2379 --addr 0.0.0.0:8300 [--advertise-addr host:8300]
               [--http-addr 0.0.0.0:9300 | --metrics-addr 0.0.0.0:9300]
               [--tls-cert server.pem --tls-key server.key [--tls-ca clients-ca.pem]]
               [--auth-token-file /etc/cdc/token [--read-token-file /etc/cdc/read-token]]
               [--secrets-dir /etc/cdc/secrets ...] [--secrets-env-prefix CDC_]

Registers under a lease in etcd, campaigns for owner, serves the admin
endpoint (gRPC health, reflection, cdc.v1.CaptureService) and, with
--http-addr, Prometheus metrics on /metrics, the JSON API and the web console
on one listener (--metrics-addr: /metrics alone, as before); runs until
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

from capture.gc_policy import tune_after_startup
from capture.security import load_server_tls
from capture.server import CaptureServer, PortTakenError, ServerConfig
from cdc.api.channel import read_token_file
from cdc.errors import ConfigError
from cdc.logs import get_logger, setup_logging
from cdc.store import EtcdConfig, StoreError
from cdc.store.keys import cluster_prefix
from cdc.uri.secrets import (
    DEFAULT_SECRETS_DIR,
    DEFAULT_SECRETS_ENV_PREFIX,
    DIRS_VARIABLE,
    PREFIX_VARIABLE,
    RESERVED_VARIABLE,
    SecretPolicy,
)

EXIT_BAD_INPUT = 2
EXIT_UNAVAILABLE = 3
#: Seconds between the main thread's looks at a signal another thread received.
SIGNAL_POLL = 0.5

# The server's own variables: never lent to a changefeed as password-env, whatever the prefix.
_OWN_VARIABLES = (
    "CDC_ETCD",
    "CDC_ETCD_USER",
    "CDC_ETCD_PASSWORD",
    "CDC_AUTH_TOKEN_FILE",
    "CDC_READ_TOKEN_FILE",
    DIRS_VARIABLE,
    PREFIX_VARIABLE,
    RESERVED_VARIABLE,
)


def build_parser() -> argparse.ArgumentParser:
    env = os.environ.get
    parser = argparse.ArgumentParser(
        prog="cdc-server",
        description="Run one capture of the CDC cluster (owner candidate and processor).",
        epilog="Exit codes: 0 stopped by signal, 2 bad flags or unreadable TLS/token files, "
        "3 etcd unreachable or a port (--addr, --http-addr, --metrics-addr) taken.",
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
    parser.add_argument(
        "--http-addr",
        help="serve /metrics, the JSON API (/api/v1) and the web console (/) on "
        "http://HOST:PORT, https with --tls-cert; the admin API's tokens apply",
    )
    parser.add_argument(
        "--metrics-addr",
        help="serve Prometheus metrics alone on http://HOST:PORT/metrics (--http-addr "
        "serves them too, beside the console)",
    )
    parser.add_argument("--tls-cert", help="PEM certificate (chain): serve the admin API over TLS")
    parser.add_argument("--tls-key", help="PEM private key of --tls-cert")
    parser.add_argument(
        "--tls-ca", help="PEM CA: require client certificates signed by it (mutual TLS)"
    )
    parser.add_argument(
        "--auth-token-file",
        default=env("CDC_AUTH_TOKEN_FILE"),
        help="file whose first line is the admin bearer token: every call must carry it "
        "or the read-only token (env CDC_AUTH_TOKEN_FILE; health checks need none)",
    )
    parser.add_argument(
        "--read-token-file",
        default=env("CDC_READ_TOKEN_FILE"),
        help="file whose first line is a read-only bearer token: queries, lists and "
        "/metrics, nothing that changes the cluster (env CDC_READ_TOKEN_FILE; needs "
        "--auth-token-file)",
    )
    dirs = env(DIRS_VARIABLE)
    parser.add_argument(
        "--secrets-dir",
        action="append",
        default=None if dirs is None else dirs.split(os.pathsep),
        metavar="DIR",
        help="a directory changefeeds may name in password-file=; repeat for several "
        f"(env {DIRS_VARIABLE}, ':'-separated; default {DEFAULT_SECRETS_DIR})",
    )
    parser.add_argument(
        "--secrets-env-prefix",
        default=env(PREFIX_VARIABLE, DEFAULT_SECRETS_ENV_PREFIX),
        metavar="PREFIX",
        help="what a variable changefeeds name in password-env= must start with; the "
        f"server's own (its etcd password) never qualify (env {PREFIX_VARIABLE}, "
        f"default {DEFAULT_SECRETS_ENV_PREFIX})",
    )
    parser.add_argument(
        "--spark-master",
        default=env("CDC_SPARK_MASTER"),
        metavar="MASTER",
        help="start this capture's Spark session on MASTER (local[*], spark://host:7077, "
        "k8s://...) with the capture, so that snapshots find it warm; changefeeds asking "
        "for another master get this one (env CDC_SPARK_MASTER; default: started when a "
        "table that snapshots arrives, on its changefeed's snapshot.spark-master)",
    )
    parser.add_argument("--log-level", default="INFO")
    return parser


def _host_port(text: str, flag: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(flag, f"{text!r} is not host:port, e.g. 127.0.0.1:8300")
    return host, int(port)


def _listen_addr(text: str | None, flag: str) -> tuple[str, int] | None:
    if not text:
        return None
    host, port = _host_port(text, flag)
    return host.strip("[]"), port


def _http_addrs(args: argparse.Namespace) -> tuple[tuple[str, int] | None, ...]:
    """(--metrics-addr, --http-addr); one HTTP listener per server, so not both."""
    if args.metrics_addr and args.http_addr:
        raise ConfigError(
            "--metrics-addr",
            "give --http-addr alone: it serves /metrics too, beside the JSON API and the console",
        )
    return (
        _listen_addr(args.metrics_addr, "--metrics-addr"),
        _listen_addr(args.http_addr, "--http-addr"),
    )


def _token(path: str | None, flag: str) -> str | None:
    return read_token_file(path, flag) if path else None


def _secrets(args: argparse.Namespace) -> SecretPolicy:
    dirs = [DEFAULT_SECRETS_DIR] if args.secrets_dir is None else args.secrets_dir
    for directory in dirs:
        if directory and not os.path.isabs(directory):
            raise ConfigError(
                "--secrets-dir", f"{directory!r} is not an absolute path, e.g. /etc/cdc/secrets"
            )
    reserved = {*_OWN_VARIABLES, args.etcd_password_env}
    return SecretPolicy.of(dirs, args.secrets_env_prefix, reserved)


def config_from_args(args: argparse.Namespace) -> ServerConfig:
    """Validated server config; ConfigError names the flag to fix."""
    if not args.etcd:
        raise ConfigError("--etcd", "no etcd endpoint: pass --etcd host:2379 or set CDC_ETCD")
    if args.lease_ttl < 2:
        raise ConfigError("--lease-ttl", f"must be at least 2 seconds, got {args.lease_ttl}")
    host, port = _host_port(args.addr, "--addr")
    advertise = args.advertise_addr or (
        f"{socket.gethostname()}:{port}" if host in ("0.0.0.0", "[::]") else args.addr
    )
    capture_id = args.capture_id or f"{socket.gethostname()}-{port}-{uuid.uuid4().hex[:6]}"
    password = os.environ.get(args.etcd_password_env) if args.etcd_user else None
    if args.etcd_user and password is None:
        raise ConfigError(
            "--etcd-password-env", f"--etcd-user is set but ${args.etcd_password_env} is not"
        )
    metrics_addr, http_addr = _http_addrs(args)
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
        metrics_addr=metrics_addr,
        http_addr=http_addr,
        tls=load_server_tls(args.tls_cert, args.tls_key, args.tls_ca),
        auth_token=_token(args.auth_token_file, "--auth-token-file"),
        read_token=_token(args.read_token_file, "--read-token-file"),
        secrets=_secrets(args),
        spark_master=args.spark_master or None,
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
    tune_after_startup()
    stopping = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        log.info("received %s, shutting down", signal.Signals(signum).name)
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    # The kernel may hand the signal to any thread; Python then only sets a flag that the
    # main thread reads between bytecodes, which a wait without a timeout never reaches
    # (a server ignored its SIGTERM so; Kubernetes would SIGKILL it after the grace period).
    while not stopping.wait(SIGNAL_POLL):
        pass
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
