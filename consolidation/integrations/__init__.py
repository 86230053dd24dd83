"""Integrations: code another library loads to run the engine over its memories.

* :mod:`.praisonai` — the PraisonAI plugin (entry point ``praisonai.plugins``): local passes
  over an agent's own memory, or passes sent to the memoryadmin console for review.

Like :mod:`consolidation.adapters`, this is a boundary: the engine core never imports it, and
each integration imports its library (praisonaiagents, from the ``.[praisonai]`` extra) only
inside itself (``tests/consolidation/test_import_purity.py``).
"""
