"""How a repository is named and identified across deliveries.

Names come from webhook bodies, which anyone holding a captured body or the secret can shape, and
they end up in URLs (GitHub API paths, report links) and in Markdown: only names GitHub itself could
have given are accepted.
"""

from __future__ import annotations

import re

# GitHub's rules: an owner (user or organisation) is 1-39 letters, digits or hyphens, not starting
# with a hyphen; a repository name is 1-100 letters, digits, `.`, `-` or `_`, and not `.` or `..`.
# (Some old accounts end in a hyphen or hold two in a row, so only the first character is checked.)
_OWNER = r"[A-Za-z0-9][A-Za-z0-9-]{0,38}"
_NAME = r"[A-Za-z0-9._-]{1,100}"
FULL_NAME = re.compile(rf"({_OWNER})/({_NAME})")


class InvalidRepositoryName(ValueError):
    pass


def check_full_name(full_name: str) -> str:
    """`owner/name` as GitHub allows it; raises InvalidRepositoryName (a ValueError) otherwise."""
    match = FULL_NAME.fullmatch(full_name)
    if match is None or match.group(2) in (".", ".."):
        raise InvalidRepositoryName(
            "is not a GitHub owner/name (owner: letters, digits and hyphens; name: letters, digits, '.', '-' and '_')"
        )
    return full_name


def repository_key(full_name: str) -> str:
    """GitHub matches owner/name without regard to case; so do the derived tables."""
    return full_name.lower()
