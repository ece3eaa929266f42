"""The management domain: what customers, providers, administrators and the public may do.

Web-free: functions take an engine and typed arguments, enforce the rules (ownership, limits,
validation beyond field shapes), call storage, and raise `ManagementError`s that the API maps
to HTTP statuses.
"""
