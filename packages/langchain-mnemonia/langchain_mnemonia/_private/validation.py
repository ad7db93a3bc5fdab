"""Argument checks shared by the adapters (fail before anything is written)."""

from __future__ import annotations

from typing import Any

from mnemonia.config import TENANT_PATTERN
from mnemonia.errors import InvalidTenantError

__all__ = ["check_tenant"]


def check_tenant(tenant: Any) -> str:
    if not isinstance(tenant, str) or not TENANT_PATTERN.match(tenant):
        raise InvalidTenantError(
            f"tenant={tenant!r}: must be 1-64 characters of letters, digits, '_' or '-', "
            "starting and ending with a letter or digit"
        )
    return tenant
