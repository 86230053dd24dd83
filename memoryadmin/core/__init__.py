"""What every domain stands on: the audit trail (models), the one place that opens a store
(stores), input checks (validation), the errors services raise (errors), roles, what the services
share (services: transitions, audit events, task names, enqueueing, failpoints), leases, the
operator's time zone (selectors), request typing and role decorators (views), error pages."""
