"""How a repository is identified across deliveries."""

from __future__ import annotations


def repository_key(full_name: str) -> str:
    """GitHub matches owner/name without regard to case; so do the derived tables."""
    return full_name.lower()
