"""The `cdc.v1.CaptureService` servicer: what this process says about itself."""

from __future__ import annotations

from collections.abc import Callable

import grpc

from capture.session import CaptureIdentity
from cdc.api.gen.cdc.v1 import capture_pb2, capture_pb2_grpc
from cdc.store import StoreError


class CaptureServicer(capture_pb2_grpc.CaptureServiceServicer):
    def __init__(
        self,
        identity: CaptureIdentity,
        cluster_id: str,
        owner_id: Callable[[], str | None],
    ) -> None:
        self.identity = identity
        self.cluster_id = cluster_id
        self._owner_id = owner_id

    def GetCapture(  # gRPC method name
        self, request: capture_pb2.GetCaptureRequest, context: grpc.ServicerContext
    ) -> capture_pb2.CaptureInfo:
        try:
            owner = self._owner_id() or ""
        except StoreError as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"etcd: {exc}")
        return capture_pb2.CaptureInfo(
            id=self.identity.capture_id,
            address=self.identity.address,
            version=self.identity.version,
            started_at=self.identity.started_at,
            is_owner=owner == self.identity.capture_id,
            owner_id=owner,
            cluster_id=self.cluster_id,
        )
