"""Argument checks of the adapters: the core's own (:mod:`mnemonia.validation`), so a bad
value gets the same typed error whichever way it enters."""

from __future__ import annotations

from mnemonia.validation import boolean as check_boolean
from mnemonia.validation import tenant as check_tenant

__all__ = ["check_boolean", "check_tenant"]
