"""Forms: the console's input validation, one module per domain. Forms never save: the views
hand their cleaned data to a service (a write) or a selector (a read). Forms import the ground
(models, validation, errors) and the selectors, never a service or a view. The grid of domains
is in docs/ARCHITECTURE.md.
"""
