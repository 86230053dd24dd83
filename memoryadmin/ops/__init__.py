"""Operations of the console itself: the dashboard, the audit pages, accounts (lockouts,
password reset), /healthz, /metrics, recovery of what a dead worker left, the demo seed."""
