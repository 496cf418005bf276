"""`tracker/config.py`: per-repository settings from the YAML file named by TRACKER_CONFIG."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

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


# --- Keys and values refused at load, each error naming its key ----------------------------------------


@pytest.mark.parametrize(
    "name",
    ["not-a-name", "a/b/c", "-owner/repo", "owner/..", "owner/.", "o" * 40 + "/r", "owner/" + "r" * 101, "own er/r"],
)
def test_a_repository_key_must_be_a_github_owner_and_name(tmp_path: Path, name: str) -> None:
    with pytest.raises(SettingsError) as caught:
        config_from(write(tmp_path, f"repositories:\n  '{name}':\n    timezone: UTC\n"))
    assert f"repositories: {name!r} is not a GitHub owner/name" in str(caught.value)


def test_one_repository_under_two_spellings_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="'Acme/Widgets' and 'acme/widgets' are the same repository"):
        config_from(write(tmp_path, "repositories:\n  Acme/Widgets: {}\n  acme/widgets:\n    public: false\n"))


@pytest.mark.parametrize("value", ["-5", "0", "true", "'12'", "1.5"])
@pytest.mark.parametrize("where", ["repositories:\n  acme/widgets:\n", "defaults:\n"])
def test_a_hook_id_must_be_a_positive_whole_number(tmp_path: Path, value: str, where: str) -> None:
    key = "repositories.acme/widgets.hook_id" if where.startswith("repositories") else "defaults.hook_id"
    indent = "    " if where.startswith("repositories") else "  "
    with pytest.raises(SettingsError, match=f"is invalid: {key}: "):
        config_from(write(tmp_path, f"{where}{indent}hook_id: {value}\n"))
    config = config_from(write(tmp_path, f"{where}{indent}hook_id: 123456789\n"))
    assert config.hook_id_for("acme/widgets") == 123456789


@pytest.mark.parametrize("directory", ["reports", "./reports", "~/reports", "../reports"])
def test_a_publish_directory_must_be_absolute(tmp_path: Path, directory: str) -> None:
    with pytest.raises(SettingsError) as caught:
        config_from(write(tmp_path, f"repositories:\n  acme/widgets:\n    publish:\n      directory: '{directory}'\n"))
    refused = str(Path(directory))  # as YAML's string becomes a path: `./reports` is `reports`
    assert f"repositories.acme/widgets.publish.directory: directory must be an absolute path, not {refused!r}" in str(
        caught.value
    )
    absolute = config_from(write(tmp_path, f"defaults:\n  publish:\n    directory: {tmp_path}\n"))
    assert absolute.publishing_for("acme/widgets").directory == tmp_path


@pytest.mark.parametrize(
    "url",
    [
        "tracker.example.com",  # no scheme
        "javascript:alert(1)",
        "ftp://tracker.example.com",
        "https://",
        "https:///reports",  # no host
        "https://tracker.example.com/a b",
        "https://tracker.example.com/\n[x](javascript:alert(1))",
        "https://tracker.example.com/\x00",
        "https://tracker.example.com/<script>",
        'https://tracker.example.com/"onclick="x',
        "https://tracker.example.com\\@evil.example",
        "https://trácker.example.com",
        "https://user:secret@tracker.example.com",
        "https://tracker.example.com/?a=1",
        "https://tracker.example.com/#top",
        "https://[::1",
        "https://tracker.example.com/" + "a" * 1000,
    ],
)
def test_a_report_url_must_be_a_plain_http_address(tmp_path: Path, url: str) -> None:
    path = tmp_path / "tracker.yaml"
    path.write_text(yaml.safe_dump({"repositories": {"acme/widgets": {"publish": {"report_url": url}}}}))
    with pytest.raises(SettingsError, match="repositories.acme/widgets.publish.report_url: report_url "):
        config_from(path)


@pytest.mark.parametrize(
    "url",
    ["https://tracker.example.com", "http://127.0.0.1:8000", "https://example.com/tracker/", "https://[::1]:8000"],
)
def test_a_report_url_may_have_a_port_and_a_path(tmp_path: Path, url: str) -> None:
    config = config_from(write(tmp_path, f"defaults:\n  publish:\n    report_url: '{url}'\n"))
    assert config.publishing_for("acme/widgets").report_url == url


@pytest.mark.parametrize("pattern", [r"(?<![\w-])prettier", r"(format)\s+\1", "(unclosed"])
def test_a_format_pattern_re2_refuses_is_an_error_naming_the_key(tmp_path: Path, pattern: str) -> None:
    path = tmp_path / "tracker.yaml"
    path.write_text(yaml.safe_dump({"repositories": {"acme/widgets": {"classification": {"format_pattern": pattern}}}}))
    with pytest.raises(SettingsError) as caught:
        config_from(path)
    key = "repositories.acme/widgets.classification.format_pattern"
    assert f"{key}: format_pattern is not a regular expression RE2 accepts" in str(caught.value)


def test_the_fast_yaml_loader_reads_the_examples_as_the_pure_one_does() -> None:
    """The config is parsed by LibYAML's loader where PyYAML has it (tracker.config._YAML_LOADER): the same
    data as PyYAML's own safe loader, on every shipped example."""
    import yaml

    from bench.fixtures.paths import ROOT
    from tracker.config import _YAML_LOADER

    examples = sorted((ROOT / "examples").glob("*.yaml"))
    assert examples
    for path in examples:
        text = path.read_text(encoding="utf-8")
        assert yaml.load(text, Loader=_YAML_LOADER) == yaml.load(text, Loader=yaml.SafeLoader), path
