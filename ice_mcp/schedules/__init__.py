"""Schedules: when a workflow fires (cron, intervals, RRULE, in a named zone) and what each slot became.

`timing` (with `spec` and `words`) is pure: every "now" is a parameter; `desk` keeps schedules in the run
store and `firing` fires them.
"""
