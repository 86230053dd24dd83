"""Views: small function views that validate a form, call one service or selector, render; one
module per domain. Views import everything below them (forms, services, selectors, the ground),
never each other's private names. The grid of domains is in docs/ARCHITECTURE.md.

Pages and their htmx fragments live in one template each; a fragment is a
``{% partialdef name inline %}`` rendered as ``"<page>.html#<name>"`` when ``request.htmx``.
"""
