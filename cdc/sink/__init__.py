"""Sinks: where a changefeed's changes go (``base`` is the interface, ``factory`` opens one).

A regular package rather than a namespace one, so that the import contracts
(``[tool.importlinter]`` in pyproject.toml) see ``cdc.sink`` and its imports.
"""
