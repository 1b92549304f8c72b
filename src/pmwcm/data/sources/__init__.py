"""Private data where it lives: DuckDB (files), PostgreSQL and Spark as count sources.

Each source compiles the public schema to SQL, checks the whole table once
when opened, and then answers ``GROUP BY`` counts on cliques
(:class:`~pmwcm.mechanisms.private_data.CountSource`);
:func:`~pmwcm.data.sources.open.open_private_data` picks one from what it is given.
"""
