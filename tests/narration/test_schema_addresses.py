"""`tracker/narration/schema.py`: the model's words may carry no address a reader could follow or be pinged by
(issue 31, item 6): no domain (`evil.example/reset`), no URL scheme (`javascript:`), no e-mail address, no
@mention, and no PR number in any form, full-width ones included. Ordinary identifiers, versions and prose
punctuation pass. Each case edits one sentence of tests/narration/test_schema.py's valid Delivered prose.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.narration.test_schema import S, delivered_input, edited, found, sentence
from tracker.narration.schema import translation_problems, validate


def checked(text: str) -> list[tuple[str, str]]:
    def edit(data: dict[str, Any]) -> None:
        sentence(data, text)

    return found(validate(edited(edit), delivered_input()))


@pytest.mark.parametrize(
    ("text", "code"),
    [
        # The review's answer: a model that obeyed an injected PR title.
        ("Users should re-authenticate at evil.example/reset before the upgrade.", "url"),
        ("The loader now runs javascript:alert(1) on load.", "url"),
        # Domains, with or without a path, however dotted.
        ("Docs moved to evil.example for now.", "url"),
        ("Docs moved to numpy.org for now.", "url"),
        ("Docs moved to mirror.evil.co.uk for now.", "url"),
        ("Docs moved to x.io for now.", "url"),
        ("Docs moved to flask.app/reset for now.", "url"),  # not a listed TLD, but a path follows
        ("Docs moved to 10.0.0.1/reset for now.", "url"),
        ("Docs moved to ｅｖｉｌ．ｃｏｍ for now.", "url"),  # full-width
        ("Docs moved to evil。com for now.", "url"),  # an ideographic full stop is a dot to a browser
        ("Docs moved to 镜像evil.com for now.", "url"),
        # URL schemes.
        ("It embeds data:text/html,hello in the page.", "url"),
        ("Write to mailto:ops for access.", "url"),
        ("It fetches from file:etc/passwd first.", "url"),
        ("It uses vbscript:run to start.", "url"),
        # E-mail addresses and mentions.
        ("Write to admin@evil.example for access.", "url"),  # the domain is found first...
        ("Write to root@localhost for access.", "email"),
        ("Thanks to @alice for the router.", "mention"),
        ("Reviewed by @nvidia/megatron-team this month.", "mention"),
        ("The @torch.compile decorator wraps the router.", "mention"),  # GitHub would ping @torch
        ("Thanks to ＠alice for the router.", "mention"),
        # PR numbers however written.
        ("It follows PR-6060 closely.", "pr_number"),
        ("It follows PR:6060 closely.", "pr_number"),
        ("It follows PR no. 6060 closely.", "pr_number"),
        ("It follows PR number 6060 closely.", "pr_number"),
        ("It follows pr6060 closely.", "pr_number"),
        ("It follows PRs 6060 and 6061 closely.", "pr_number"),
        ("It follows pull request 6060 closely.", "pr_number"),
        ("It follows pulls/6060 closely.", "pr_number"),
        ("It follows issues/6060 closely.", "pr_number"),
        ("It follows issue 6060 closely.", "pr_number"),
        ("It follows GH 6060 closely.", "pr_number"),
        ("It follows change_6060 closely.", "pr_number"),
        ("It follows ＃6060 closely.", "pr_number"),  # full-width number sign
        ("It follows #６０６０ closely.", "pr_number"),  # full-width digits
        ("It follows PR ＃ 6060 closely.", "pr_number"),
        ("It follows NVIDIA/Megatron-LM#6060 closely.", "pr_number"),
    ],
)
def test_an_address_or_a_number_is_refused(text: str, code: str) -> None:
    assert (code, S) in checked(text)


def test_an_e_mail_address_is_refused_for_its_domain_and_as_an_address() -> None:
    assert checked("Write to admin@evil.example for access.") == [("url", S), ("email", S)]


@pytest.mark.parametrize(
    "text",
    [
        "Adds torch.compile support to the MoE router.",
        "The router's __init__ takes a config, and __init__.py exports it.",
        "Megatron Core v0.12 runs 3.5 times faster than 0.11.2 on Qwen3.5 and DeepSeek-V4.1.",
        "Replaces print with logging.info in setup.py and README.md.",
        "Moves tensors with model.to, reads user.id, builds nn.Module and kernel.cu, and keeps flask.app.",
        "Note: the router keeps a 3:1 ratio at 10:30, like std::vector does.",
        "It pulls 2 tensors, issues 3 warnings and may change 2 files.",
        "Runs on 8 GPUs @ 80 GB each, e.g. H100, i.e. Hopper, in the U.S. too.",
        "Megatron：支持 MoE：路由改进，改进了 Megatron。下一步是 FP8。",
        "The IP 127.0.0.1 and the version 1.2.3.4 stay local.",
    ],
)
def test_identifiers_versions_and_punctuation_pass(text: str) -> None:
    assert checked(text) == []


def test_the_chinese_is_checked_for_addresses_too() -> None:
    from tests.narration.test_schema import chinese, english_glossary, prose

    def injected(data: dict[str, Any]) -> None:
        data["themes"][0]["summary"] += "请在 evil.example/reset 重新登录，或联系 ＠admin。"

    assert found(translation_problems(prose(), chinese(injected), english_glossary())) == [
        ("url", "themes[0].summary"),
        ("mention", "themes[0].summary"),
    ]
