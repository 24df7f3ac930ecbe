"""The flags of every cdcctl command that reads etcd itself, as cdc-server has them.

--etcd H:P[,H:P]          CDC_ETCD           endpoints
--cluster-id ID                              the cluster's key prefix (/cdc/<id>)
--etcd-ca FILE            CDC_ETCD_CA        TLS to etcd, the server verified against FILE
--etcd-cert/--etcd-key    CDC_ETCD_CERT/KEY  a client certificate
--etcd-user USER          CDC_ETCD_USER      etcd authentication; the password is read
--etcd-password-env NAME                     from $NAME (default CDC_ETCD_PASSWORD),
                                             never from a flag (it would be in `ps`)
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from cdc.errors import ConfigError

if TYPE_CHECKING:
    from cdc.store import EtcdConfig

__all__ = ["add_etcd_flags", "etcd_config_of"]

_FLAGS: tuple[tuple[str, str, str], ...] = (
    ("--etcd", "CDC_ETCD", "etcd endpoints host:port[,host:port]"),
    ("--etcd-ca", "CDC_ETCD_CA", "CA file: use TLS to etcd, verifying its certificate"),
    ("--etcd-cert", "CDC_ETCD_CERT", "client certificate file for etcd TLS"),
    ("--etcd-key", "CDC_ETCD_KEY", "key file of --etcd-cert"),
    ("--etcd-user", "CDC_ETCD_USER", "etcd user (password from --etcd-password-env)"),
)


def add_etcd_flags(parser: argparse.ArgumentParser) -> None:
    """Adds the etcd flags (each with its environment variable) to ``parser``."""
    for flag, env, help_text in _FLAGS:
        parser.add_argument(flag, default=os.environ.get(env), help=f"{help_text} (env {env})")
    parser.add_argument(
        "--etcd-password-env",
        default="CDC_ETCD_PASSWORD",
        help="name of the environment variable holding the etcd password",
    )
    parser.add_argument("--cluster-id", default="default", help="cluster id (etcd key prefix)")


def etcd_config_of(args: argparse.Namespace) -> EtcdConfig:
    """The etcd settings of the flags; ConfigError (exit 2) names the flag to fix."""
    if not args.etcd:
        raise ConfigError("--etcd", "no etcd endpoint: pass --etcd host:2379 or set CDC_ETCD")
    password = None
    if args.etcd_user:
        password = os.environ.get(args.etcd_password_env)
        if password is None:
            raise ConfigError(
                "--etcd-password-env",
                f"--etcd-user is set but ${args.etcd_password_env} is not; "
                f"export {args.etcd_password_env}=... first",
            )
    if args.etcd_cert and not args.etcd_ca:
        raise ConfigError("--etcd-ca", "a client certificate needs TLS: give --etcd-ca too")
    if bool(args.etcd_cert) != bool(args.etcd_key):
        missing = "--etcd-key" if args.etcd_cert else "--etcd-cert"
        raise ConfigError(missing, "a client certificate needs both --etcd-cert and --etcd-key")
    # the key layout, imported by the commands that read etcd alone
    from cdc.store import EtcdConfig
    from cdc.store.keys import cluster_prefix

    return EtcdConfig(
        EtcdConfig.parse_endpoints(args.etcd),
        prefix=cluster_prefix(args.cluster_id),
        ca=args.etcd_ca or None,
        cert=args.etcd_cert or None,
        key=args.etcd_key or None,
        user=args.etcd_user or None,
        password=password,
    )
