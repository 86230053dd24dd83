"""Proposals: a pass from request to plan (the Pass state machine), its figures and guards
(evaluation), auto-apply, dry runs, the Review tab and reviewers' standing decisions, apply
(journaled, resumable) and rollback (undo a pass, restore an archived memory, the archive page)."""
