"""The read-only dashboard and the static batch report (see docs/dashboard.md)."""
