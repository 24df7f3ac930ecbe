"""The `cdc-server` process: admin endpoint, capture session, processor, and the owner.

CaptureServer.start()
  ├─ gRPC on --addr: health (SERVING once registered), reflection, cdc.v1.CaptureService,
  │  cdc.v1.ChangefeedService (the admin API: reads from etcd, writes via ChangefeedStore),
  │  cdc.v1.SubscriptionService (the pull sinks of the changefeeds running here; clients of
  │  others are sent to the capture serving them: cdc.subscription.host);
  │  TLS and a bearer token when configured (capture/security.py)
  ├─ /metrics on --metrics-addr, when given: HTTPS with the admin API's certificate and
  │  the read-only or admin token when those are set (capture/metrics_endpoint.py)
  ├─ on --http-addr, when given: /metrics, the JSON API and the web console on one
  │  listener, same TLS and tokens, and the last hour of lag in memory (capture/http)
  ├─ CaptureSession: capture key under a lease, campaign for owner
  ├─ processor.Processor: the table pipelines assigned to this capture, running while
  │  the capture is registered and its lease is known alive (suspended when it is lost)
  └─ on election: owner.Owner runs until the term ends

stop(): the pipelines stop first and report their final checkpoints (pull sinks
closed if their clients ack nothing for a while), then the owner, then the
session resigns and revokes the lease.
"""

from __future__ import annotations

import threading
import time
from concurrent import futures
from dataclasses import dataclass, field

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from capture.access import AccessTokens
from capture.admin_service import ChangefeedServicer
from capture.http.front import HttpFront, HttpServices
from capture.info_service import CaptureServicer
from capture.liveness import LeaseClock
from capture.metrics_endpoint import MetricsEndpoint
from capture.request_decoding import DecodingInterceptor
from capture.security import AccessInterceptor, ServerTLS
from capture.session import CaptureIdentity, CaptureSession
from cdc import metrics
from cdc.api.gen.cdc.v1 import admin_pb2, admin_pb2_grpc, capture_pb2, capture_pb2_grpc
from cdc.logs import get_logger
from cdc.sink.pull import serve_pull
from cdc.store import EtcdConfig, EtcdStore, Fence
from cdc.subscription import PullHost, Router, add_subscription_service
from cdc.uri.secrets import (
    DEFAULT_SECRETS_DIR,
    DEFAULT_SECRETS_ENV_PREFIX,
    SecretPolicy,
    install_policy,
)
from owner.chunk_shares import ShareOwner
from owner.owner import Owner
from processor.processor import Processor
from processor.share_runner import ShareRunner
from processor.spark import LazySpark

VERSION = "0.1.0"


@dataclass(frozen=True)
class ServerConfig:
    """Everything `cdc-server` is started with (flags of capture.main).

    ``metrics_addr`` is ``(host, port)`` of the /metrics endpoint, None for none;
    ``http_addr`` that of the listener serving /metrics, the JSON API and the console.
    ``secrets``: the files and variables changefeeds may name for passwords.
    ``spark_master``: the capture's Spark session is started on it with the capture
    (warm when the first snapshot comes); None: when a table that snapshots arrives.
    """

    etcd: EtcdConfig
    listen_addr: str
    advertise_addr: str
    capture_id: str
    cluster_id: str = "default"
    lease_ttl: int = 10
    metrics_addr: tuple[str, int] | None = None
    http_addr: tuple[str, int] | None = None
    tls: ServerTLS | None = None
    auth_token: str | None = field(default=None, repr=False)
    read_token: str | None = field(default=None, repr=False)
    secrets: SecretPolicy = field(
        default_factory=lambda: SecretPolicy.of([DEFAULT_SECRETS_DIR], DEFAULT_SECRETS_ENV_PREFIX)
    )
    spark_master: str | None = None

    def __post_init__(self) -> None:
        AccessTokens(self.auth_token, self.read_token)  # ConfigError if they do not go together

    @property
    def tokens(self) -> AccessTokens:
        """The admin and read-only tokens."""
        return AccessTokens(self.auth_token, self.read_token)


class CaptureServer:
    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.log = get_logger(__name__, capture=config.capture_id)
        self.store = EtcdStore(config.etcd)
        self.identity = CaptureIdentity(
            config.capture_id, config.advertise_addr, VERSION, time.time()
        )
        self.session = CaptureSession(
            self.store,
            self.identity,
            config.lease_ttl,
            self._elected,
            self._deposed,
            on_registered=self._registered,
            on_unregistered=self._unregistered,
        )
        self._clock: LeaseClock | None = None
        self.spark = LazySpark(f"cdc-{config.capture_id}")
        self.processor = Processor(
            self.store, config.capture_id, self.spark, alive=self._alive, warm=self.spark.warm
        )
        self.shares = ShareRunner(
            self.store,
            config.capture_id,
            self.processor.snapshots,
            self.spark,
            alive=self._alive,
        )
        self.pull = PullHost(self.store)
        self._owner: Owner | None = None
        self._share_owner: ShareOwner | None = None
        self._owner_lock = threading.Lock()
        self._health = health.HealthServicer()
        tokens = config.tokens
        access = [AccessInterceptor(tokens)] if tokens.enabled else []
        # access first: a refused call is not even parsed
        interceptors = [*access, DecodingInterceptor()]
        self._grpc = grpc.server(
            futures.ThreadPoolExecutor(max_workers=8), interceptors=interceptors
        )
        self._metrics: MetricsEndpoint | None = None
        self._http: HttpFront | None = None

    def start(self) -> None:
        """Binds the ports first, so a taken port fails before anything is registered."""
        capture = CaptureServicer(self.identity, self.config.cluster_id, self.session.owner)
        changefeeds = ChangefeedServicer(
            self.store, secrets=self.config.secrets, tokens=self.config.tokens
        )
        capture_pb2_grpc.add_CaptureServiceServicer_to_server(capture, self._grpc)
        admin_pb2_grpc.add_ChangefeedServiceServicer_to_server(changefeeds, self._grpc)
        router = Router(self.store, self.config.capture_id, self.config.advertise_addr)
        subscriptions = add_subscription_service(self._grpc, self.pull.registry, router)
        health_pb2_grpc.add_HealthServicer_to_server(self._health, self._grpc)
        names = (
            capture_pb2.DESCRIPTOR.services_by_name["CaptureService"].full_name,
            admin_pb2.DESCRIPTOR.services_by_name["ChangefeedService"].full_name,
            subscriptions,
            health.SERVICE_NAME,
            reflection.SERVICE_NAME,
        )
        reflection.enable_server_reflection(names, self._grpc)
        self._health.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
        self._bind_admin()
        if self.config.metrics_addr is not None:
            host, port = self.config.metrics_addr
            try:
                tls = self.config.tls.http if self.config.tls is not None else None
                self._metrics = MetricsEndpoint(host, port, tls=tls, tokens=self.config.tokens)
            except OSError as exc:
                raise PortTakenError(f"{host}:{port}", "--metrics-addr") from exc
        self._start_http(HttpServices(self.store, changefeeds, capture))
        # before anything connects: the pipelines, the owner and Spark's workers resolve
        # password references under this policy (cdc.uri.secrets)
        install_policy(self.config.secrets)
        serve_pull(self.pull)
        self._grpc.start()
        self.store.revision()
        if self.config.spark_master is not None:
            self.spark.warm(self.config.spark_master)  # off the first snapshot's path
        self.processor.start(active=False)
        self.shares.start()
        self.session.start()
        self._health.set("", health_pb2.HealthCheckResponse.SERVING)
        self.log.info(
            "cdc-server %s listening on %s (%s%s)%s",
            VERSION,
            self.config.listen_addr,
            _transport(self.config.tls),
            _tokens(self.config.tokens),
            f", metrics on {self._metrics.url}" if self._metrics else "",
        )
        if self._http is not None:
            self.log.info("console and HTTP API on %s", self._http.url)
        if self.config.auth_token and self.config.tls is None:
            self.log.warning(
                "the bearer token travels in clear text without TLS: "
                "add --tls-cert and --tls-key unless the network is trusted"
            )

    def _start_http(self, services: HttpServices) -> None:
        if self.config.http_addr is None:
            return
        host, port = self.config.http_addr
        tls = self.config.tls.http if self.config.tls is not None else None
        try:
            self._http = HttpFront(host, port, services, tls=tls, tokens=self.config.tokens)
        except OSError as exc:
            if self._metrics is not None:
                self._metrics.stop()
            raise PortTakenError(f"{host}:{port}", "--http-addr") from exc

    def _bind_admin(self) -> None:
        addr, tls = self.config.listen_addr, self.config.tls
        try:
            if tls is None:
                bound = self._grpc.add_insecure_port(addr)
            else:
                bound = self._grpc.add_secure_port(addr, tls.credentials())
        except RuntimeError as exc:
            raise PortTakenError(addr) from exc
        if bound == 0:
            raise PortTakenError(addr)

    def stop(self) -> None:
        self._health.enter_graceful_shutdown()
        self.shares.stop()
        with self.pull.closing_after():
            self.processor.stop()
        self.pull.close()
        self._deposed()
        self.session.stop()
        self._grpc.stop(grace=2).wait()
        if self._metrics is not None:
            self._metrics.stop()
        if self._http is not None:
            self._http.stop()
        self.spark.stop()
        self.store.close()
        self.log.info("cdc-server stopped")

    def _alive(self) -> bool:
        clock = self._clock
        return clock is not None and clock.fresh()

    def _registered(self, clock: LeaseClock) -> None:
        self._clock = clock
        self.processor.resume()

    def _unregistered(self) -> None:
        self._clock = None
        self.processor.suspend()
        self.spark.cancel_jobs()  # snapshot chunks in flight write nothing more

    def _elected(self, fence: Fence) -> None:
        # The owner on an etcd client and gRPC channel of its own (closed in _deposed):
        # on this capture's, its cycle's reads and writes queued behind the processor's
        # watches (at 10,000 tables, cycles of 150-250 ms that computed 10 ms)
        owner_store = EtcdStore(self.store.config)
        try:
            with self._owner_lock:
                self._owner = Owner(owner_store, self.config.capture_id, fence)
                self._owner.start()
                self._share_owner = ShareOwner(self.store, fence).start()
        except BaseException:
            # A term that could not start (etcd failing as the mirrors read) ends here:
            # an owner left running would cycle beside the next one until fenced, and
            # its store would stay open. The session retries with a new lease.
            self._deposed()
            owner_store.close()
            raise
        metrics.became_owner()

    def _deposed(self) -> None:
        with self._owner_lock:
            owner, self._owner = self._owner, None
            shares, self._share_owner = self._share_owner, None
        if shares is not None:
            shares.stop()
        if owner is not None:
            metrics.stepped_down()
            owner.stop()
            owner.store.close()


def _tokens(tokens: AccessTokens) -> str:
    if not tokens.enabled:
        return ""
    return ", admin and read-only tokens" if tokens.read else ", admin token"


def _transport(tls: ServerTLS | None) -> str:
    if tls is None:
        return "plain text"
    return "TLS" if tls.client_ca is None else "mutual TLS"


class PortTakenError(RuntimeError):
    def __init__(self, addr: str, flag: str = "--addr") -> None:
        super().__init__(
            f"cannot listen on {addr}: the port is in use or the address is not local; "
            f"stop the other process or pass another {flag}"
        )
