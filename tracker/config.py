"""Per-repository settings from the optional YAML file named by TRACKER_CONFIG.

```yaml
defaults:
  timezone: Asia/Shanghai
repositories:
  NVIDIA/Megatron-LM:
    timezone: Asia/Shanghai
```
"""

from __future__ import annotations

from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from tracker.settings import Settings, SettingsError


class RepositoryConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    timezone: str | None = None

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                ZoneInfo(value)
            except (ZoneInfoNotFoundError, ValueError) as exc:
                raise ValueError(f"unknown time zone {value!r}") from exc
        return value


class TrackerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    defaults: RepositoryConfig = RepositoryConfig()
    repositories: dict[str, RepositoryConfig] = {}
    fallback_timezone: str = "Asia/Shanghai"

    def for_repo(self, full_name: str) -> RepositoryConfig:
        # GitHub treats owner/name case-insensitively; so do we.
        wanted = full_name.lower()
        for name, repo_config in self.repositories.items():
            if name.lower() == wanted:
                return repo_config
        return self.defaults

    def timezone_for(self, full_name: str) -> str:
        return self.for_repo(full_name).timezone or self.defaults.timezone or self.fallback_timezone


def load_config(settings: Settings) -> TrackerConfig:
    """The YAML config if TRACKER_CONFIG names one, else the defaults; TRACKER_TIMEZONE is the fallback."""
    data: dict[str, object] = {}
    if settings.config_path is not None:
        path = Path(settings.config_path)
        try:
            loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise SettingsError(f"TRACKER_CONFIG names {path}, which does not exist") from exc
        except yaml.YAMLError as exc:
            raise SettingsError(f"TRACKER_CONFIG {path} is not valid YAML: {exc}") from exc
        if loaded is not None and not isinstance(loaded, dict):
            raise SettingsError(f"TRACKER_CONFIG {path} must hold a mapping at the top level")
        data = dict(loaded or {})
        if "fallback_timezone" in data:
            raise SettingsError(
                f"TRACKER_CONFIG {path}: fallback_timezone is not a file setting: "
                "use defaults.timezone, or the TRACKER_TIMEZONE environment variable"
            )
    try:
        return TrackerConfig.model_validate({**data, "fallback_timezone": settings.timezone})
    except ValidationError as exc:
        raise SettingsError(f"TRACKER_CONFIG {settings.config_path} is invalid: {exc}") from exc
