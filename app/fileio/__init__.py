"""Strict file I/O every layer may use: atomic writes and strict JSON (no NaN ever written)."""
