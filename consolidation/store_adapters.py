"""Store adapters: how ``Consolidator().consolidate(x)`` writes to another library's memory.

A library's memory object (PraisonAI's ``FileMemory``, its chroma-backed ``Memory``) has only
``get_all_memories()``: read as it is, a pass could plan but never write. An integration
declares, in the entry-point group :data:`GROUP`, an adapter for the memory's type: the entry
point's **name** is the type's qualified name (``module.QualName``, e.g.
``praisonaiagents.memory.file_memory.FileMemory``) and its **value** a callable
``adapter(memory) -> (store, field_map | None)`` returning a
:class:`~consolidation.protocols.WritableMemoryStore` over that memory.

The engine core finds it by the names of the types in ``type(memory).__mro__`` and loads the
entry point only on a match, so it never imports the integration (nor its library) for any
other memory: ``tests/consolidation/test_import_purity.py`` checks that.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from .records import FieldMap

__all__ = ["GROUP", "adapt", "adapter_for"]

GROUP = "consolidation.stores"
"""The entry-point group of store adapters (this project's ``pyproject.toml`` declares
PraisonAI's under it)."""

Adapter = Callable[[Any], tuple[Any, FieldMap | None]]


def adapter_for(memory: Any) -> Adapter | None:
    """The adapter declared for ``type(memory)`` or its nearest base class, or ``None``.

    Raises what loading the entry point raises (e.g. ``ImportError`` when the integration's
    library is broken): a memory of that type without its adapter could not be written.
    """
    declared = {ep.name: ep for ep in entry_points(group=GROUP)}
    if not declared:
        return None
    for cls in type(memory).__mro__:
        ep = declared.get(f"{cls.__module__}.{cls.__qualname__}")
        if ep is not None:
            return ep.load()
    return None


def adapt(memory: Any) -> tuple[Any, FieldMap | None]:
    """``(store, field_map)`` to plan and write ``memory`` through: its adapter's answer, or
    ``(memory, None)`` as it is when no adapter is declared for its type."""
    adapter = adapter_for(memory)
    return (memory, None) if adapter is None else adapter(memory)
