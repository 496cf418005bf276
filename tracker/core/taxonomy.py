"""A repository's theme taxonomy: technical areas (themes) and their sub-areas (highlights), each
named in English and Chinese and matched by path globs, labels and title keywords. Pure data; the
YAML config (`tracker.config`) reads it, the theme chooser (`tracker.core.themes`) uses it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class HighlightConfig(BaseModel):
    """A sub-area of a theme (one bullet of the report), named in English and Chinese, matched by
    path globs, labels and title keywords."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    en: str
    zh: str
    paths: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()


class ThemeConfig(HighlightConfig):
    """A technical area of the repository. A change belongs to the theme that matches it best."""

    highlights: tuple[HighlightConfig, ...] = ()
