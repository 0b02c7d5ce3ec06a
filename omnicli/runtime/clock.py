"""The one UTC timestamp every result file writes (`started_at`, `finished_at`, retention sidecars)."""

from __future__ import annotations

from datetime import datetime, timezone


def utc_now() -> str:
    """Now in UTC, ISO 8601 to the second (`2026-12-01T22:57:34+00:00`)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
