"""URIs: the grammar every URI shares, MySQL connection URIs, sizes and durations.

A low layer of the core (``[tool.importlinter]`` in pyproject.toml): the source
(``cdc.source``, ``cdc.binlog``, ``cdc.snapshot``), the sinks (each sink kind's
URI type lives in its package under ``cdc.sink``) and the changefeed
configuration (``cdc.config``) all parse URIs with it, and it needs none of them.

    grammar  scheme://rest?param=value: splitting, parameters and their value checks
    mysql    MySQLURI (where and how to connect) and parse_source_uri
    secrets  which files and variables a password reference may name (the server's policy)
    cleartext  no password in clear text to a server whose certificate was not verified
    units    sizes (64MiB) and durations (1m30s)

Parsed URIs are frozen dataclasses whose ``str()`` and ``repr()`` never show a
password; every problem is a :class:`cdc.errors.ConfigError` naming the URI
field (or ``<field>.<parameter>``) with what is allowed and an example.
"""
