"""Selectors: the console's reads, one module per domain (HackSoft style: services write,
selectors read).

Everything a page shows comes from here: our own models (never django-q2's tables) and, for
memories, the agent's store through :func:`memoryadmin.console.stores.get_store` (the one place
that opens a store). Selectors import the ground (models, stores, validation, errors) and each
other, never a service, a form or a view. The grid of domains is in docs/ARCHITECTURE.md.
"""
