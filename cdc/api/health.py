"""Client side of the standard gRPC health check, used by the playground and probes."""

from __future__ import annotations

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


def is_serving(target: str, timeout: float = 2.0, service: str = "") -> bool:
    """True when the server at `target` answers SERVING for `service` ("" = the whole server)."""
    with grpc.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
        except grpc.RpcError:
            return False
    return reply.status == health_pb2.HealthCheckResponse.SERVING
