"""`tracker/config.py`: per-repository settings from the YAML file named by TRACKER_CONFIG."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracker.config import RepositoryConfig, TrackerConfig, load_config
from tracker.settings import SettingsError, load_settings

pytestmark = pytest.mark.usefixtures("no_tracker_environment")


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tracker.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def config_from(path: Path | None, timezone: str = "Asia/Shanghai") -> TrackerConfig:
    return load_config(load_settings(config_path=path, timezone=timezone))


def test_per_repository_timezone(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
defaults:
  timezone: Europe/Berlin
repositories:
  NVIDIA/Megatron-LM:
    timezone: America/Los_Angeles
  octo/Hello-World: {}
""",
    )
    config = config_from(path)
    assert config.timezone_for("NVIDIA/Megatron-LM") == "America/Los_Angeles"
    # GitHub treats owner/name case-insensitively.
    assert config.timezone_for("nvidia/megatron-lm") == "America/Los_Angeles"
    assert config.timezone_for("NVIDIA/MEGATRON-LM") == "America/Los_Angeles"
    # A listed repository without a time zone, and an unlisted one, take the defaults.
    assert config.timezone_for("octo/Hello-World") == "Europe/Berlin"
    assert config.timezone_for("someone/else") == "Europe/Berlin"


def test_without_a_file_every_repository_uses_the_fallback() -> None:
    config = config_from(None)
    assert config == TrackerConfig(fallback_timezone="Asia/Shanghai")
    assert config.timezone_for("NVIDIA/Megatron-LM") == "Asia/Shanghai"


def test_fallback_is_tracker_timezone(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TRACKER_TIMEZONE", "America/New_York")
    path = write(tmp_path, "repositories:\n  NVIDIA/Megatron-LM:\n    timezone: UTC\n")
    monkeypatch.setenv("TRACKER_CONFIG", str(path))
    config = load_config(load_settings())
    assert config.timezone_for("NVIDIA/Megatron-LM") == "UTC"
    assert config.timezone_for("other/repo") == "America/New_York"


def test_default_fallback_is_shanghai() -> None:
    assert load_config(load_settings()).timezone_for("any/repo") == "Asia/Shanghai"


def test_defaults_win_over_the_fallback(tmp_path: Path) -> None:
    path = write(tmp_path, "defaults:\n  timezone: Asia/Tokyo\n")
    config = config_from(path, timezone="UTC")
    assert config.timezone_for("any/repo") == "Asia/Tokyo"


@pytest.mark.parametrize("text", ["", "# only a comment\n", "null\n"], ids=["empty", "comment", "null"])
def test_an_empty_file_means_defaults(tmp_path: Path, text: str) -> None:
    config = config_from(write(tmp_path, text), timezone="Europe/Paris")
    assert config.repositories == {}
    assert config.timezone_for("NVIDIA/Megatron-LM") == "Europe/Paris"


def test_for_repo_is_case_insensitive() -> None:
    berlin = RepositoryConfig(timezone="Europe/Berlin")
    config = TrackerConfig(repositories={"Octo/Repo": berlin})
    assert config.for_repo("octo/repo") is berlin
    assert config.for_repo("OCTO/REPO") is berlin
    assert config.for_repo("octo/repo2") == config.defaults


def test_a_missing_file_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.yaml"
    with pytest.raises(SettingsError) as caught:
        config_from(missing)
    message = str(caught.value)
    assert "TRACKER_CONFIG" in message
    assert str(missing) in message
    assert "does not exist" in message


def test_invalid_yaml_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "repositories:\n  NVIDIA/Megatron-LM: [unclosed\n")
    with pytest.raises(SettingsError, match="is not valid YAML") as caught:
        config_from(path)
    assert str(path) in str(caught.value)


def test_a_list_at_the_top_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="mapping at the top level"):
        config_from(write(tmp_path, "- NVIDIA/Megatron-LM\n"))


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("colour: red\n", "colour"),
        ("defaults:\n  tz: UTC\n", "tz"),
        ("repositories:\n  NVIDIA/Megatron-LM:\n    time_zone: UTC\n", "time_zone"),
    ],
    ids=["top-level", "in-defaults", "in-a-repository"],
)
def test_an_unknown_key_is_an_error(tmp_path: Path, text: str, name: str) -> None:
    with pytest.raises(SettingsError) as caught:
        config_from(write(tmp_path, text))
    message = str(caught.value)
    assert "is invalid" in message
    assert name in message


def test_fallback_timezone_cannot_be_set_from_the_file(tmp_path: Path) -> None:
    # TRACKER_TIMEZONE is the fallback; the file's own key for it is `defaults.timezone`.
    path = write(tmp_path, "fallback_timezone: Europe/Oslo\n")
    with pytest.raises(SettingsError, match="defaults.timezone"):
        config_from(path, timezone="UTC")


@pytest.mark.parametrize(
    "text",
    [
        "defaults:\n  timezone: Mars/Olympus_Mons\n",
        "repositories:\n  NVIDIA/Megatron-LM:\n    timezone: Asia/Shangai\n",
        "repositories:\n  NVIDIA/Megatron-LM:\n    timezone: ''\n",
    ],
    ids=["defaults", "typo-in-a-repository", "empty"],
)
def test_an_unknown_time_zone_is_an_error(tmp_path: Path, text: str) -> None:
    with pytest.raises(SettingsError, match="unknown time zone"):
        config_from(write(tmp_path, text))


def test_the_narrator_is_opted_in_per_repository(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "defaults:\n  glossary: [Megatron-LM]\nrepositories:\n"
        "  NVIDIA/Megatron-LM:\n    narrator: llm\n    glossary: [GTP, MFSDP]\n  acme/widgets: {}\n",
    )
    assert config_from(path).narrator_for("nvidia/megatron-lm") == "deterministic"  # no endpoint configured
    config = load_config(
        load_settings(config_path=path, llm_base_url="http://127.0.0.1:8000/v1", llm_model="qwen2.5:14b")
    )
    assert config.narrator_model == "qwen2.5:14b"
    assert config.narrator_for("nvidia/megatron-lm") == "llm"
    assert config.narrator_for("acme/widgets") == "deterministic"
    assert config.narrator_for("someone/else") == "deterministic"
    assert config.glossary_for("NVIDIA/Megatron-LM") == ("GTP", "MFSDP", "Megatron-LM")


def test_an_unknown_narrator_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SettingsError):
        config_from(write(tmp_path, "repositories:\n  acme/widgets:\n    narrator: gpt\n"))
    with pytest.raises(SettingsError, match="TRACKER_LLM_MODEL"):
        config_from(write(tmp_path, "narrator_model: gpt-4o\n"))
