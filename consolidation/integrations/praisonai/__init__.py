"""The PraisonAI plugin: memory consolidation for praisonaiagents agents.

Install with the ``praisonai`` extra (``pip install 'memoryadmin[praisonai]'``, which pins
praisonaiagents 1.7.17); PraisonAI finds :class:`ConsolidationPlugin` through the
``praisonai.plugins`` entry point ``memoryadmin``.

* :mod:`.plugin` — :class:`ConsolidationPlugin` (consolidator, timer, every-N-turns hook);
* :mod:`.stores` — PraisonAI's ``FileMemory`` and chroma-backed ``Memory`` as writable stores;
* :mod:`.console` — console mode: passes reviewed in the memoryadmin console over its API.
"""

from __future__ import annotations

from .console import Console, ConsoleError, ConsoleSettings
from .plugin import DEFAULT_CRON, PLUGIN_NAME, ConsolidationPlugin, PluginOptions, to_praisonai
from .stores import FileMemoryStore, collection_name, writable_store

__all__ = [
    "DEFAULT_CRON",
    "PLUGIN_NAME",
    "Console",
    "ConsoleError",
    "ConsoleSettings",
    "ConsolidationPlugin",
    "FileMemoryStore",
    "PluginOptions",
    "collection_name",
    "to_praisonai",
    "writable_store",
]
