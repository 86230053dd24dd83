"""Presenters: model → schema, how agents, memories, passes, operations and events look in the
API and MCP; one module per domain. Reads only, through the console's selectors; nothing here
writes."""
