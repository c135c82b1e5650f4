"""Reusable UI pieces: URL-backed state, filters, export buttons, triage."""
