"""Sinks: where a changefeed's changes go.

``base`` is the interface every sink implements; ``kind`` the seam each kind of
sink fills (its URI type and parameters, create-time checks, table
preparation, opening, snapshot chunks), in its own package or module
(``mysql``, ``file``, ``blackhole``, ``pull``); ``registry`` maps schemes to
kinds and parses sink URIs; ``factory`` opens a sink.

A regular package rather than a namespace one, so that the import contracts
(``[tool.importlinter]`` in pyproject.toml) see ``cdc.sink`` and its imports.
"""
