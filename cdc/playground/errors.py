"""Errors of the local services layer.

Every failure a developer can hit while starting or stopping the private
MariaDB/etcd instances surfaces as a ``ServiceError`` whose message says what
went wrong and what to do next, so ``cdcctl playground`` and the test fixtures
can show it as-is.
"""


class ServiceError(RuntimeError):
    """A local service could not be installed, started, checked or stopped."""


class PortInUseError(ServiceError):
    """A port a local service needs on 127.0.0.1 is already taken."""
