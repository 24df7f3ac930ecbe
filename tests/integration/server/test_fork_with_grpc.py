"""A capture forks while gRPC is busy: the children must reach ``exec``.

PySpark starts the Spark JVM with ``subprocess.Popen(..., preexec_fn=...)``, a ``fork()``
that runs Python in the child before ``exec``; the playground's servers start the same
way. With grpcio's fork support on (its default), grpcio 1.80 and later restart their
poller in such a child, which then aborts on ``epoll_wait: Bad file descriptor`` before it
execs (grpc/grpc#43055): by hand, 4 to 6 of 300 children, a Spark session or a server that
never starts. ``cdc`` turns fork support off when it is imported (``cdc/__init__.py``).

The check runs in a fresh interpreter that imports ``capture.main`` first, as
``cdc-server`` does, then serves gRPC health checks and keeps calling them from two
threads while it starts 300 children with a ``preexec_fn``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.integration

CHILDREN = 300

SCRIPT = textwrap.dedent(
    """
    import capture.main  # noqa: F401  (first, as cdc-server: sets gRPC's fork handling)
    import subprocess, sys, threading
    from concurrent import futures
    import grpc
    from grpc_health.v1 import health, health_pb2, health_pb2_grpc

    server = grpc.server(futures.ThreadPoolExecutor(4))
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    stub = health_pb2_grpc.HealthStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
    done = threading.Event()

    def calls():
        while not done.is_set():
            stub.Check(health_pb2.HealthCheckRequest(), timeout=10)

    for _ in range(2):
        threading.Thread(target=calls, daemon=True).start()
    failed = []
    for _ in range(int(sys.argv[1])):
        child = subprocess.Popen(["true"], preexec_fn=lambda: None, stderr=subprocess.PIPE)
        _, err = child.communicate()
        if child.returncode != 0:
            failed.append(f"exit {child.returncode}: {err.decode(errors='replace')[:200]}")
    done.set()
    server.stop(None).wait()
    print(len(failed))
    print("\\n".join(failed[:3]))
    """
)


def test_children_forked_while_grpc_is_busy_reach_exec() -> None:
    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(CHILDREN)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    failed, _, examples = run.stdout.partition("\n")
    assert failed == "0", f"{failed} of {CHILDREN} children died before exec: {examples}"
