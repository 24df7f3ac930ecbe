"""The core both roles share (event model, positions, etcd store, config, filters, binlog,
schema history, sinks, CLI).

Importing it sets ``GRPC_ENABLE_FORK_SUPPORT=false`` for this process (unless already set),
before any gRPC is loaded: a capture forks while gRPC is busy (its admin server, its etcd
client's watches), and with fork support on, grpcio 1.80 and later restart their poller in
the child of a ``fork()`` that runs Python before ``exec``, which ``subprocess.Popen`` does
with a ``preexec_fn``, as PySpark's launch of the Spark JVM and the playground's server
starts do. The child then aborts on ``epoll_wait: Bad file descriptor`` before it execs
(grpc/grpc#43055): by hand, 4 to 6 of 300 such children with gRPC calls running, none of
400 with fork support off. No process of ours runs gRPC in a forked child, which is all
fork support is for.
"""

import os

os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
