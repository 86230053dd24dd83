"""The JSON API (``/api/v1/``, django-ninja) and the MCP server (``manage.py mcp_server``).

Both act for a user (an API token's owner, or ``--user`` on stdio) with that user's console
role, and both go through the console's public services and selectors, so a pass started here is
the same pass, with the same guard, audit and review, as one started from a page.
"""
