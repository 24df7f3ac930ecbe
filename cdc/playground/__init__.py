"""Private MariaDB and etcd servers on loopback for the developer playground and the tests.

Never the system's services: every server runs as a child process with its
data, socket, pid file and logs under a directory of its own.
"""

from typing import TYPE_CHECKING

from cdc.lazy import exports

if TYPE_CHECKING:
    from cdc.playground.errors import PortInUseError, ServiceError
    from cdc.playground.etcd import EtcdServer, EtcdSpec
    from cdc.playground.local import LocalServices, PlaygroundPorts
    from cdc.playground.mariadb import MariaDBServer, MariaDBSpec
    from cdc.playground.packages import ensure_packages
    from cdc.playground.ports import ensure_port_free, free_port, wait_for_port

__all__ = [
    "EtcdServer",
    "EtcdSpec",
    "LocalServices",
    "MariaDBServer",
    "MariaDBSpec",
    "PlaygroundPorts",
    "PortInUseError",
    "ServiceError",
    "ensure_packages",
    "ensure_port_free",
    "free_port",
    "wait_for_port",
]

# imported when first used (``cdc.lazy``): `cdcctl` reads its playground command's defaults
# here, and its other commands start without the etcd client and the servers' machinery
__getattr__ = exports(
    globals(),
    {
        "cdc.playground.errors": ("PortInUseError", "ServiceError"),
        "cdc.playground.etcd": ("EtcdServer", "EtcdSpec"),
        "cdc.playground.local": ("LocalServices", "PlaygroundPorts"),
        "cdc.playground.mariadb": ("MariaDBServer", "MariaDBSpec"),
        "cdc.playground.packages": ("ensure_packages",),
        "cdc.playground.ports": ("ensure_port_free", "free_port", "wait_for_port"),
    },
)
