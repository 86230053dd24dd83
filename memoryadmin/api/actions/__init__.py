"""Actions: what the API and the MCP tools do, once, one module per domain: look-ups, role checks
and the console's services.

Every write goes through the console's public services (``pass_request``, ``pass_approve``,
``pass_reject``, ``operation_set_excluded``, ``pass_rollback_request``) with the acting user, so
it is audited with that user as the actor and obeys the same constraints as a page: one active
pass per agent (I-5), the guard re-checked on approve, stale operations, rollback blockers.
Roles are the console's (``memoryadmin.core.roles``): viewers read (and may dry-run, which
writes nothing), reviewers also review and roll back, admins also start passes ("Run now").

Errors are :class:`ActionError` subclasses carrying an HTTP status and a sentence a person can
act on; the API turns them into JSON, the MCP server into tool errors.
"""
