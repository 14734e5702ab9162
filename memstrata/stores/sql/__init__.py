"""The SQL both backends speak: every row query written once.

``dialect`` holds :class:`~.dialect.SQLDialect`, the hooks through which the two SQL
backends differ (placeholders, how a time, a JSON value and a list of values are bound,
what a lone write statement needs); each backend fills them in its own ``dialect.py``.
Over it: ``rows`` (the message log, sessions, items, jobs, profile versions, metadata
and LLM usage), ``admin`` (the service's keys, audit log and rate windows) and ``cache``
(the embedding cache). The knowledge base's rows (:mod:`memstrata.stores.knowledge`)
use the same dialect. The search index is each backend's own (FTS5 and a change log on
SQLite; pgvector and a per-scope log on PostgreSQL).

Nothing is imported here, so a module of the package can be imported on its own.
"""
