"""Client side of the standard gRPC health check, used by the playground and probes.

As a command, for a container HEALTHCHECK or a Kubernetes exec probe (exit 0
when SERVING, 1 otherwise)::

    python -m cdc.api.health 127.0.0.1:8300 [--tls-ca ca.pem [--tls-server-name NAME]
                                             [--tls-cert c.pem --tls-key c.key]]

The health service needs no bearer token; TLS files are needed when the
server serves TLS (a client certificate too under mutual TLS).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from cdc.api.channel import ClientSecurity, open_channel

__all__ = ["is_serving", "main"]


def is_serving(
    target: str, timeout: float = 2.0, service: str = "", security: ClientSecurity | None = None
) -> bool:
    """True when the server at `target` answers SERVING for `service` ("" = the whole server)."""
    with open_channel(target, security) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
        except grpc.RpcError:
            return False
    return reply.status == health_pb2.HealthCheckResponse.SERVING


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cdc.api.health", description="Exit 0 when a cdc-server is SERVING."
    )
    parser.add_argument("address", help="HOST:PORT of the admin endpoint")
    parser.add_argument("--timeout", type=float, default=2.0, help="seconds")
    parser.add_argument("--tls-ca", help="CA of the server's certificate (TLS)")
    parser.add_argument("--tls-cert", help="client certificate (mutual TLS)")
    parser.add_argument("--tls-key", help="client key (mutual TLS)")
    parser.add_argument(
        "--tls-server-name", help="name in the server's certificate, if not the address's host"
    )
    args = parser.parse_args(argv)
    try:
        security = ClientSecurity(
            args.tls_ca, args.tls_cert, args.tls_key, server_name=args.tls_server_name
        )
        serving = is_serving(args.address, args.timeout, security=security)
    except ValueError as exc:
        print(f"health: error: {exc}", file=sys.stderr)
        return 2
    print("SERVING" if serving else "NOT SERVING")
    return 0 if serving else 1


if __name__ == "__main__":
    sys.exit(main())
