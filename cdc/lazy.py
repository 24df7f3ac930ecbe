"""A package's exports imported when first used (PEP 562), not when the package is.

``cdcctl`` imports what its commands name at start-up, and a package whose
``__init__`` imported all its modules made every command pay for them: importing
``cdc.snapshot.chunk`` (a key range) imported the chunk reader, the binlog puller and
python-mysql-replication; ``cdc.store.keys`` (the key layout) the etcd client and gRPC.
A package that exports through :func:`exports` keeps its public names, and imports
the module behind one only when that name is used. Type checkers read the same
imports under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any

__all__ = ["exports"]


def exports(
    package: MutableMapping[str, Any], modules: Mapping[str, Sequence[str]]
) -> Callable[[str], Any]:
    """The ``__getattr__`` of the package whose globals are ``package``: each name of
    ``modules[module]`` comes from ``module``, imported on first use and then kept."""
    where = {name: module for module, names in modules.items() for name in names}
    package_name = package["__name__"]

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package_name!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        package[name] = value
        return value

    return __getattr__
