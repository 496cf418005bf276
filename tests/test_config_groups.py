"""`groups:` in TRACKER_CONFIG (tracker/config.py): names and members checked, with messages that say what to
write; `owner/*` expanded to the owner's configured and tracked repositories."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracker.config import PublishConfig, TrackerConfig, load_config
from tracker.settings import SettingsError, load_settings

pytestmark = pytest.mark.usefixtures("no_tracker_environment")


def loaded(tmp_path: Path, text: str) -> TrackerConfig:
    path = tmp_path / "tracker.yaml"
    path.write_text(text, encoding="utf-8")
    return load_config(load_settings(config_path=path, timezone="Asia/Shanghai"))


def test_groups_are_read(tmp_path: Path) -> None:
    config = loaded(tmp_path, "groups:\n  training: [NVIDIA/Megatron-LM, NVIDIA/NeMo]\n  acme: ['acme/*']\n")
    assert {name: group.members for name, group in config.groups.items()} == {
        "training": ("NVIDIA/Megatron-LM", "NVIDIA/NeMo"),
        "acme": ("acme/*",),
    }
    assert config.group_publishing("training") == PublishConfig()  # published nowhere unless it says
    assert config.group_named("TRAINING") == "training"
    assert config.group_named("other") is None


def test_a_group_may_be_a_mapping_with_members_and_where_it_is_published(tmp_path: Path) -> None:
    config = loaded(
        tmp_path,
        "groups:\n  training:\n    members: [NVIDIA/Megatron-LM, 'acme/*']\n"
        "    publish:\n      directory: /srv/reports\n  plain: [acme/widgets]\n",
    )
    assert config.groups["training"].members == ("NVIDIA/Megatron-LM", "acme/*")
    assert config.group_publishing("training") == PublishConfig(directory=Path("/srv/reports"))
    assert config.members_of("training", ["acme/widgets"]) == ("NVIDIA/Megatron-LM", "acme/widgets")
    assert config.group_publishing("plain").enabled is False


def test_a_group_may_be_published_as_an_issue(tmp_path: Path) -> None:
    config = loaded(
        tmp_path,
        "groups:\n  training:\n    members: [acme/widgets]\n    publish:\n      issue_repository: acme/reports\n"
        "      issue_author: tracker-bot\n      report_url: https://tracker.example.com\n",
    )
    publishing = config.group_publishing("training")
    assert publishing.enabled and publishing.directory is None
    assert (publishing.issue_repository, publishing.issue_author) == ("acme/reports", "tracker-bot")
    assert publishing.report_url == "https://tracker.example.com"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("groups:\n  'a b': [acme/widgets]\n", "groups: 'a b' is not a group name"),
        ("groups:\n  -x: [acme/widgets]\n", "is not a group name"),
        ("groups:\n  " + "g" * 65 + ": [acme/widgets]\n", "at most 64 characters"),
        ("groups:\n  g: [widgets]\n", "'widgets' is not a member: give a GitHub owner/name, or owner/*"),
        ("groups:\n  g: ['acme/w*']\n", "'acme/w*' is not a member"),
        ("groups:\n  g: ['*/*']\n", "'*/*' is not a member"),
        ("groups:\n  g: []\n", "group 'g' has no members"),
        ("groups:\n  g: [acme/widgets, ACME/Widgets]\n", "group 'g' lists 'ACME/Widgets' twice"),
        ("groups:\n  g: [acme/x]\n  G: [acme/y]\n", "'g' and 'G' differ only in case"),
        (
            "groups:\n  g: acme/widgets\n",
            "groups.g: a group is a list of members ([owner/name, owner/*]), or a mapping",
        ),
        ("groups:\n  g: {members: []}\n", "group 'g' has no members"),
        ("groups:\n  g: {publish: {directory: /srv}}\n", "groups.g.members: Field required"),
        ("groups:\n  g: {members: [widgets]}\n", "'widgets' is not a member"),
        ("groups:\n  g: {members: [a/b], color: red}\n", "groups.g.color: Extra inputs are not permitted"),
        ("groups:\n  g: {members: [a/b], publish: {directory: srv}}\n", "directory must be an absolute path"),
        (
            "groups:\n  g: {members: [a/b], publish: {issue_repository: a/reports, weekly_partial: true}}\n",
            "groups.g.publish: a group publishes its finalised months only: weekly_partial is for a repository",
        ),
        ("groups:\n  g: {members: [a/b], publish: {issue_repository: reports}}\n", "groups.g.publish.issue_repository"),
    ],
)
def test_bad_groups_are_refused_with_what_to_write(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(SettingsError) as caught:
        loaded(tmp_path, text)
    assert message in str(caught.value)
    assert str(caught.value).count("groups") >= 1


def test_owner_star_is_every_configured_or_tracked_repository_of_the_owner() -> None:
    config = TrackerConfig.model_validate(
        {
            "repositories": {"acme/Configured": {}, "other/thing": {}},
            "groups": {"g": ["acme/*", "zeta/one", "ACME/tracked"]},
        }
    )
    tracked = ["acme/Tracked", "acmeco/not-this", "Other/else", "acme/configured"]
    # The ledger's spelling wins; each repository once; an explicit member kept in its place.
    assert config.members_of("g", tracked) == ("acme/configured", "acme/Tracked", "zeta/one")
    assert config.members_of("g", []) == ("acme/Configured", "zeta/one", "ACME/tracked")
