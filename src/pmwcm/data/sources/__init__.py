"""Private data where it lives: DuckDB (files), PostgreSQL and Spark as count sources.

Each source compiles the public schema to SQL, checks the whole table once
when opened, and then answers ``GROUP BY`` counts on cliques
(:class:`~pmwcm.mechanisms.private_data.CountSource`);
:func:`~pmwcm.data.sources.open.open_source` picks one from what it is given,
and ``PrivateData.of`` (:mod:`pmwcm.mechanisms.private_data`) reads it.
"""
