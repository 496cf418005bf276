r"""Per-repository settings from the optional YAML file named by TRACKER_CONFIG.

```yaml
defaults:
  timezone: Asia/Shanghai
repositories:
  NVIDIA/Megatron-LM:
    timezone: Asia/Shanghai
    classification:
      ci_paths: [".github/", "ci/", "tools/ci/", "tests/test_utils/python_scripts/"]
      test_paths: ["tests/", "test/", "*/golden_values*.json"]
      format_pattern: '\b(auto-format|formatting|format)\b'
    hook_id: 123456789   # reconciliation redelivers the hook's failed deliveries
  example/internal:
    public: false   # its reports need the admin token or a signed link (`tracker link`)
groups:             # one report over several repositories: /reports/groups/<name>/<YYYY-MM>.html
  training: [NVIDIA/Megatron-LM, NVIDIA/NeMo]
  example: ["example/*"]   # every tracked repository of the owner `example`
  platform:                # the mapping form: members, and where its finalised months are published
    members: [NVIDIA/Megatron-LM, "example/*"]
    publish:
      directory: /srv/reports
```
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from tracker.core.classify import (
    DEFAULT_CI_PATHS,
    DEFAULT_FORMAT_PATTERN,
    DEFAULT_TEST_PATHS,
    Rules,
    compile_format_pattern,
)
from tracker.core.repository import InvalidRepositoryName, check_full_name
from tracker.core.taxonomy import ThemeConfig
from tracker.settings import Settings, SettingsError


class ClassificationConfig(BaseModel):
    """Exclusion rules; each list replaces the default list (SEMANTICS, "Exclusions")."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ci_paths: tuple[str, ...] | None = None
    test_paths: tuple[str, ...] | None = None
    format_pattern: str | None = None

    @field_validator("format_pattern")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                compile_format_pattern(value)
            except ValueError as exc:
                raise ValueError(f"format_pattern is not a regular expression RE2 accepts: {exc}") from exc
        return value


# A link's address in the issue body: this service's address and a path after it. Long enough for
# any real address, short beside the 65,536 characters of an issue body it appears in.
MAX_REPORT_URL = 1000
# RFC 3986's characters (unreserved, reserved and `%`): no space, control, non-ASCII character, quote,
# angle bracket or backslash, so the address cannot end a Markdown link or an HTML attribute.
_URL_CHARACTERS = re.compile(r"[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]+")


class PublishConfig(BaseModel):
    """Where a month is published (off unless set): Markdown files under `directory`
    (`reports/en-US/YYYY/MM.md`, `reports/zh-CN/YYYY/MM.md`), and one issue per month in
    `issue_repository` (needs GITHUB_TOKEN with write access to its issues). `report_url` is this
    service's public address, for the issue's link to the full report; `weekly_partial` also
    publishes the month to date every week."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    directory: Path | None = None
    issue_repository: str | None = None
    # The login the tracker posts as (a user, or an app's `<slug>[bot]`): only its issues can be
    # taken for the month's issue, so a copied marker line in someone else's issue changes nothing.
    issue_author: str | None = None
    report_url: str | None = None
    weekly_partial: bool = False

    @field_validator("directory")
    @classmethod
    def _absolute(cls, value: Path | None) -> Path | None:
        # A relative directory would depend on the working directory of whichever process publishes.
        if value is not None and not value.is_absolute():
            raise ValueError(f"directory must be an absolute path, not {str(value)!r}")
        return value

    @field_validator("issue_repository")
    @classmethod
    def _github_name(cls, value: str | None) -> str | None:
        return check_full_name(value) if value is not None else None

    @field_validator("report_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if len(value) > MAX_REPORT_URL:
            raise ValueError(f"report_url must be at most {MAX_REPORT_URL} characters long")
        if not _URL_CHARACTERS.fullmatch(value):
            raise ValueError(
                "report_url must be a URL without spaces, control characters, quotes, angle brackets, "
                "backslashes or non-ASCII characters (percent-encode them)"
            )
        try:
            parts = urlsplit(value)
            host = parts.hostname
        except ValueError as exc:
            raise ValueError(f"report_url is not a URL: {exc}") from exc
        if parts.scheme not in ("https", "http") or not host:
            raise ValueError("report_url must be this service's address: https:// (or http://) and a host")
        if parts.username is not None or parts.password is not None:
            raise ValueError("report_url must not hold a user name or password: the issue shows it to everyone")
        if parts.query or parts.fragment or value.endswith(("?", "#")):
            raise ValueError("report_url must have no query or fragment: report paths are added after it")
        return value

    @property
    def enabled(self) -> bool:
        return self.directory is not None or self.issue_repository is not None


class RepositoryConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    timezone: str | None = None
    # False: the reports need the admin token or a signed link (tracker.web.access); None: as `defaults`.
    public: bool | None = None
    classification: ClassificationConfig | None = None
    themes: tuple[ThemeConfig, ...] | None = None
    publish: PublishConfig | None = None
    # The repository webhook's id (Settings → Webhooks → the hook's URL ends with it): with a token
    # that may administer the hook, reconciliation asks GitHub to redeliver what failed to arrive.
    hook_id: Annotated[int, Field(strict=True, gt=0)] | None = None  # strict: `true` is not hook 1
    # Who writes the report's words: "deterministic" (the default), or "llm" for the language-model
    # narrator when TRACKER_LLM_BASE_URL and TRACKER_LLM_MODEL are set (tracker.narration); None: as `defaults`.
    narrator: Literal["deterministic", "llm"] | None = None
    # Terms the Chinese translation keeps verbatim, besides the acronyms and names found in the English.
    glossary: tuple[str, ...] = ()

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                ZoneInfo(value)
            except (ZoneInfoNotFoundError, ValueError) as exc:
                raise ValueError(f"unknown time zone {value!r}") from exc
        return value


# A group's name is a path segment of its report's address (/reports/groups/<name>/…): letters, digits,
# `.`, `-` and `_`, starting with a letter or digit, at most 64 characters.
GROUP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# A member `<owner>/*`: every tracked repository of the owner (configured, or seen in the ledger).
EVERY_REPOSITORY = "*"


def check_group_member(member: str) -> str:
    """`owner/name` as GitHub allows it, or `owner/*`. Raises ValueError saying what a member may be."""
    owner, slash, name = member.partition("/")
    try:
        check_full_name(f"{owner}/repository" if slash and name == EVERY_REPOSITORY else member)
    except InvalidRepositoryName:
        raise ValueError(
            f"{member!r} is not a member: give a GitHub owner/name, or owner/* for every tracked repository of "
            "the owner (owner: letters, digits and hyphens; name: letters, digits, '.', '-' and '_')"
        ) from None
    return member


class GroupConfig(BaseModel):
    """A group: its members (`owner/name` or `owner/*`), and where its finalised months are published (files in
    `publish.directory`, an issue in `publish.issue_repository`; no weekly partial). Written as the list of
    members alone, or as a mapping with `members` and `publish`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    members: tuple[str, ...]
    publish: PublishConfig | None = None

    @model_validator(mode="before")
    @classmethod
    def _list_of_members(cls, value: object) -> object:
        if isinstance(value, list | tuple):
            return {"members": value}
        if not isinstance(value, dict | GroupConfig):
            raise ValueError(
                "a group is a list of members ([owner/name, owner/*]), or a mapping with `members` and `publish`"
            )
        return value

    @field_validator("publish")
    @classmethod
    def _final_only(cls, value: PublishConfig | None) -> PublishConfig | None:
        if value is not None and value.weekly_partial:
            raise ValueError("a group publishes its finalised months only: weekly_partial is for a repository")
        return value

    @property
    def publishing(self) -> PublishConfig:
        return self.publish or PublishConfig()


class TrackerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    defaults: RepositoryConfig = RepositoryConfig()
    repositories: dict[str, RepositoryConfig] = {}
    # One report over several repositories a month (tracker.reports.groups): name -> members (and publishing).
    groups: dict[str, GroupConfig] = {}
    fallback_timezone: str = "Asia/Shanghai"
    # The language-model narrator's model, from TRACKER_LLM_MODEL when the narrator is configured
    # (TRACKER_LLM_BASE_URL too); None: every report is deterministic. Not a file setting.
    narrator_model: str | None = None

    @field_validator("repositories")
    @classmethod
    def _github_names(cls, value: dict[str, RepositoryConfig]) -> dict[str, RepositoryConfig]:
        seen: dict[str, str] = {}
        for name in value:
            try:
                check_full_name(name)
            except InvalidRepositoryName as exc:
                raise ValueError(f"{name!r} {exc}") from exc
            # GitHub treats owner/name case-insensitively: two spellings would be one repository.
            earlier = seen.setdefault(name.lower(), name)
            if earlier != name:
                raise ValueError(f"{earlier!r} and {name!r} are the same repository: keep one")
        return value

    @field_validator("groups")
    @classmethod
    def _group_members(cls, value: dict[str, GroupConfig]) -> dict[str, GroupConfig]:
        names: dict[str, str] = {}
        for name, group in value.items():
            members = group.members
            if not GROUP_NAME.fullmatch(name):
                raise ValueError(
                    f"{name!r} is not a group name: letters, digits, '.', '-' and '_', starting with a letter or "
                    "a digit, at most 64 characters (it is part of the report's address)"
                )
            earlier = names.setdefault(name.lower(), name)
            if earlier != name:
                raise ValueError(f"{earlier!r} and {name!r} differ only in case: keep one group")
            if not members:
                raise ValueError(f"group {name!r} has no members: list owner/name or owner/* entries")
            seen: set[str] = set()
            for member in members:
                check_group_member(member)
                if member.lower() in seen:  # GitHub's names are case-insensitive: one member, twice
                    raise ValueError(f"group {name!r} lists {member!r} twice: keep one")
                seen.add(member.lower())
        return value

    def group_named(self, name: str) -> str | None:
        """The configured spelling of group `name` (any case), or None when there is no such group."""
        return next((group for group in self.groups if group.lower() == name.lower()), None)

    def members_of(self, group: str, tracked: Sequence[str]) -> tuple[str, ...]:
        """The repositories of `group` (a configured name), each once, in the order the group lists them, an
        `owner/*` entry expanded to every repository of the owner that is configured or in `tracked` (the
        ledger's names), by name. A name in `tracked` is spelled as there, else as configured."""
        spelled = {name.lower(): name for name in self.repositories}
        spelled.update({name.lower(): name for name in tracked})
        members: dict[str, str] = {}
        for entry in self.groups[group].members:
            owner, _, name = entry.partition("/")
            if name == EVERY_REPOSITORY:
                owned = (spelled[key] for key in spelled if key.partition("/")[0] == owner.lower())
                found = sorted(owned, key=str.lower)
            else:
                found = [spelled.get(entry.lower(), entry)]
            for repo in found:
                members.setdefault(repo.lower(), repo)
        return tuple(members.values())

    def in_a_group(self, full_name: str) -> bool:
        """Whether the repository is a member of some group (`members_of`: itself, or by its owner's `owner/*`)."""
        wanted = full_name.lower()
        return any(wanted in (repo.lower() for repo in self.members_of(group, [full_name])) for group in self.groups)

    def group_publishing(self, group: str) -> PublishConfig:
        """Where a group's finalised months are published (a configured name): its own `publish`, else nowhere."""
        return self.groups[group].publishing

    def for_repo(self, full_name: str) -> RepositoryConfig:
        # GitHub treats owner/name case-insensitively; so do we.
        wanted = full_name.lower()
        for name, repo_config in self.repositories.items():
            if name.lower() == wanted:
                return repo_config
        return self.defaults

    def timezone_for(self, full_name: str) -> str:
        return self.for_repo(full_name).timezone or self.defaults.timezone or self.fallback_timezone

    def is_public(self, full_name: str) -> bool:
        """Whether anyone may read the repository's reports: its own `public`, then `defaults`, then yes."""
        own = self.for_repo(full_name).public
        if own is not None:
            return own
        return self.defaults.public if self.defaults.public is not None else True

    def themes_for(self, full_name: str) -> tuple[ThemeConfig, ...]:
        """The repository's taxonomy, else the default one, else none (themes come from the code layout)."""
        own = self.for_repo(full_name).themes
        return own if own is not None else (self.defaults.themes or ())

    def narrator_for(self, full_name: str) -> str:
        """`llm` when the narrator is configured and the repository (or `defaults`) opts in to it."""
        wanted = self.for_repo(full_name).narrator or self.defaults.narrator or "deterministic"
        return wanted if self.narrator_model is not None else "deterministic"

    def glossary_for(self, full_name: str) -> tuple[str, ...]:
        return tuple(dict.fromkeys((*self.for_repo(full_name).glossary, *self.defaults.glossary)))

    def hook_id_for(self, full_name: str) -> int | None:
        return self.for_repo(full_name).hook_id

    def publishing_for(self, full_name: str) -> PublishConfig:
        """Where the repository's months are published: its own `publish`, else `defaults`, else nowhere."""
        return self.for_repo(full_name).publish or self.defaults.publish or PublishConfig()

    def rules_for(self, full_name: str) -> Rules:
        """The repository's exclusion rules: its own settings, then `defaults`, then the published ones."""
        layers = [c for c in (self.for_repo(full_name).classification, self.defaults.classification) if c]
        ci = next((c.ci_paths for c in layers if c.ci_paths is not None), DEFAULT_CI_PATHS)
        test = next((c.test_paths for c in layers if c.test_paths is not None), DEFAULT_TEST_PATHS)
        pattern = next((c.format_pattern for c in layers if c.format_pattern is not None), DEFAULT_FORMAT_PATTERN)
        return Rules(ci_paths=ci, test_paths=test, format_pattern=pattern)


# PyYAML's safe loader, in C (LibYAML) when PyYAML was built with it: a large config (a taxonomy's themes and
# their patterns) parses in 20 ms instead of 180, in every process that builds its services.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_config(settings: Settings) -> TrackerConfig:
    """The YAML config if TRACKER_CONFIG names one, else the defaults; TRACKER_TIMEZONE is the fallback."""
    data: dict[str, object] = {}
    if settings.config_path is not None:
        path = Path(settings.config_path)
        try:
            loaded = yaml.load(path.read_text(encoding="utf-8"), Loader=_YAML_LOADER)
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
        if "narrator_model" in data:
            raise SettingsError(
                f"TRACKER_CONFIG {path}: narrator_model is not a file setting: use the TRACKER_LLM_MODEL "
                "environment variable, and `narrator: llm` for the repositories that want it"
            )
    model = settings.llm_model if settings.llm_enabled else None
    try:
        return TrackerConfig.model_validate({**data, "fallback_timezone": settings.timezone, "narrator_model": model})
    except ValidationError as exc:
        raise SettingsError(f"TRACKER_CONFIG {settings.config_path} is invalid: {_problems(exc)}") from exc


def _problems(error: ValidationError) -> str:
    """Each problem after the key it is about (`repositories.acme/widgets.hook_id: …`), without
    pydantic's input echo and links."""
    problems = []
    for problem in error.errors(include_url=False, include_input=False):
        where = ".".join(str(part) for part in problem["loc"])
        what = str(problem["msg"]).removeprefix("Value error, ")
        problems.append(f"{where}: {what}" if where else what)
    return "; ".join(problems)
