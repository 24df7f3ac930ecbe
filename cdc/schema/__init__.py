"""Schema history: the schema of every captured table at every binlog position.

Initial schemas are read once from ``information_schema`` at the start
position (``loader``); from there every DDL in the binlog is parsed (``ddl``,
with sqlglot) and applied in order (``history``). A past event's meaning is
never looked up on the live server again, whose schema may have moved on.
"""
