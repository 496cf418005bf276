"""A PR's own description in one sentence (tracker.core.descriptions, issue 32 item 6): bodies written as real
PR templates are (Megatron-LM's, the common GitHub one, conventional summaries, Dependabot, Renovate,
CodeRabbit), template-only and empty ones, and hostile ones, each of which must answer quickly and clean."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.fixtures.paths import WEBHOOKS, needs_shared
from tests.support.watchdog import finishes
from tracker.core.descriptions import MAX_WORDS, summary_sentence

# NVIDIA/Megatron-LM's pull request template (.github/pull_request_template.md), shortened where it repeats.
MEGATRON = """# What does this PR do ?
<!-- Add a one line overview of what this PR aims to accomplish. -->
{description}
:warning: For major changes (either in lines of code or in its impact), please make sure to first share discuss \
a design-doc with the team.

## Contribution process

```mermaid
flowchart LR
    A[Pre-checks] --> B[PR Tests]
    subgraph Code Review/Approval
        C1[Expert Review] --> C2[Final Review]
    end
```

### Pre-checks

- [ ] I want this PR in a versioned release and have added the appropriate Milestone (e.g., `Core 0.8`)
- [ ] I have added relevant unit tests
- [ ] I have added proper typing to my code [Typing guidelines](https://docs.python.org/3/library/typing.html)
- [ ] I have run the [autoformatter.sh](https://github.com/NVIDIA/Megatron-LM/blob/main/tools/autoformat.sh) on my PR

### Code review

The following process is enforced via the CODEOWNERS file for changes into `megatron/core`. For changes outside \
of `megatron/core`, it is up to the PR author whether or not to tag the Final Reviewer team.

<details>
<summary>For MRs into `main` branch</summary>

#### (Step 1): Add PR label `Expert Review`

#### (Step 2): Collect the expert reviewers reviews

1. Attach the `Expert Review` label when your PR is ready for review.
2. GitHub auto-assigns expert reviewers based on your changes. They will get notified and pick up your PR soon.

</details>

### Merging your PR

Any member of [core-adlr](https://github.com/orgs/teams/NVIDIA/core-adlr) will be able to merge your PR.
"""

# The common "Description / Type of change / How Has This Been Tested?" template many repositories copy.
GITHUB_TEMPLATE = """# Description

Please include a summary of the changes and the related issue. Please also include relevant motivation and \
context. List any dependencies that are required for this change.
{description}
Fixes # (issue)

## Type of change

Please delete options that are not relevant.

- [ ] Bug fix (non-breaking change which fixes an issue)
- [ ] New feature (non-breaking change which adds functionality)

# How Has This Been Tested?

Please describe the tests that you ran to verify your changes.

- [ ] Test A

# Checklist:

- [ ] My code follows the style guidelines of this project
"""

DEPENDABOT = """Bumps [lodash](https://github.com/lodash/lodash) from 4.17.15 to 4.17.21.
<details>
<summary>Commits</summary>
<ul>
<li><a href="https://github.com/lodash/lodash/commit/f299b52f"><code>f299b52</code></a> Bump to v4.17.21</li>
<li>See full diff in <a href="https://github.com/lodash/lodash/compare/4.17.15...4.17.21">compare view</a></li>
</ul>
</details>
<br />


[![Dependabot compatibility score](https://dependabot-badges.githubapp.com/badges/compatibility_score?\
dependency-name=lodash&package-manager=npm_and_yarn&previous-version=4.17.15&new-version=4.17.21)]\
(https://docs.github.com/en/github/managing-security-vulnerabilities/about-dependabot-security-updates)

Dependabot will resolve any conflicts with this PR as long as you don't alter it yourself. You can also trigger \
a rebase manually by commenting `@dependabot rebase`.
"""

RENOVATE = """[![Mend Renovate](https://app.renovatebot.com/images/banner.svg)](https://renovatebot.com)

This PR contains the following updates:

| Package | Change | Age | Confidence |
|---|---|---|---|
| [torch](https://pytorch.org) | `2.3.0` -> `2.4.0` | [![age](https://x/age.svg)](https://docs.renovatebot.com) | |

---

### Release Notes

<details>
<summary>pytorch/pytorch (torch)</summary>

### [`v2.4.0`](https://github.com/pytorch/pytorch/releases/tag/v2.4.0)

PyTorch 2.4 adds support for the latest version of Python for torch.compile.
</details>

---

### Configuration

📅 **Schedule**: Branch creation - At any time (no schedule defined), Automerge - At any time.
"""

CODERABBIT = """## Summary by CodeRabbit

* **New Features**
  * Added FP8 support to the attention kernels of the dynamic inference engine.
* **Bug Fixes**
  * Fixed a hang at shutdown.
"""


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(
            MEGATRON.format(
                description="Adds a `--moe-router-dtype` flag so that MoE routing can run in FP32 (see #4512, "
                "thanks @alice). Tests follow.\n"
            ),
            "Adds a `--moe-router-dtype` flag so that MoE routing can run in FP32.",
            id="megatron",
        ),
        pytest.param(
            MEGATRON.format(
                description="\nFix the hang in `torch.distributed` checkpoint save when ranks race, e.g. on "
                "v0.17.0 files like `foo.py` or 1.5 GB shards.\n"
            ),
            "Fix the hang in `torch.distributed` checkpoint save when ranks race, e.g. on v0.17.0 files like "
            "`foo.py` or 1.5 GB shards.",
            id="megatron-abbreviations-versions-files-decimals",
        ),
        pytest.param(
            GITHUB_TEMPLATE.format(description="\nThis change moves the optimizer state to the CPU when offloading.\n"),
            "This change moves the optimizer state to the CPU when offloading.",
            id="github-template-filled",
        ),
        pytest.param(
            "## Summary\n- adds a **prefix caching** path to the [dynamic engine](https://x.example/doc) for "
            "chunked prefill\n- fixes the scheduler\n\n## Test plan\n- ran the unit tests locally today\n",
            "Adds a prefix caching path to the dynamic engine for chunked prefill.",
            id="summary-bullets",
        ),
        pytest.param(DEPENDABOT, "Bumps lodash from 4.17.15 to 4.17.21.", id="dependabot"),
        pytest.param(
            CODERABBIT, "Added FP8 support to the attention kernels of the dynamic inference engine.", id="coderabbit"
        ),
        pytest.param(
            "**Summary:** this adds a *new* __fast__ path for the `all_gather` in FSDP2\n\n**Testing**\nCI.",
            "This adds a new fast path for the `all_gather` in FSDP2.",
            id="bold-label",
        ),
        pytest.param(
            "What does this PR do?\r\nRemoves the dead code in the MoE token dispatcher.\r\n\r\nMore text here.",
            "Removes the dead code in the MoE token dispatcher.",
            id="crlf-plain-label",
        ),
        pytest.param(
            "Summary\n-------\nThis makes the Qwen3.5-VL loader tolerate missing keys.",
            "This makes the Qwen3.5-VL loader tolerate missing keys.",
            id="setext-heading",
        ),
        pytest.param(
            "## What does this PR do ?\nThis PR does the following:\n- Adds a new `--foo` flag to the training loop.\n",
            "Adds a new `--foo` flag to the training loop.",
            id="odd-spacing-and-colon-introduced-list",
        ),
        pytest.param(
            "Makes the checkpoint loader retry on transient errors\nAlso logs each retry at the warning level.",
            "Makes the checkpoint loader retry on transient errors.",
            id="line-ended-on-purpose",
        ),
        pytest.param(
            "This change teaches the distributed optimizer to shard its state across the data parallel\n"
            "Ranks of every pipeline stage.",
            "This change teaches the distributed optimizer to shard its state across the data parallel Ranks of "
            "every pipeline stage.",
            id="line-wrapped-at-72",
        ),
        pytest.param(
            "Fixes #123\n\nThis change moves the optimizer state to the CPU when offloading is on.",
            "This change moves the optimizer state to the CPU when offloading is on.",
            id="reference-line-first",
        ),
        pytest.param(
            '## Summary\n<img src="https://x/y.png">\n\n![diagram](https://x/y.png)\n\n'
            "Reduces peak memory of the MoE dispatcher by about a third.",
            "Reduces peak memory of the MoE dispatcher by about a third.",
            id="images-skipped",
        ),
        pytest.param(
            "Sum\u200bmary: Adds zero\u200b-width \u202ehandling to the text cleaner.",
            "Adds zero-width handling to the text cleaner.",
            id="zero-width-characters",
        ),
        pytest.param(
            "## Overview\n\nPlease describe your changes.\n\nMoves the `Tensor` handling -> the new module here.",
            "Moves the `Tensor` handling → the new module here.",
            id="instructions-skipped-arrows-kept",
        ),
    ],
)
def test_the_first_sentence_of_the_summary(body: str, expected: str) -> None:
    assert summary_sentence(body) == expected


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(None, id="none"),
        pytest.param("", id="empty"),
        pytest.param("   \n\n\t\n", id="blank"),
        pytest.param(MEGATRON.format(description=""), id="megatron-template-only"),
        pytest.param(GITHUB_TEMPLATE.format(description=""), id="github-template-only"),
        pytest.param(RENOVATE, id="renovate-table"),
        pytest.param("https://github.com/NVIDIA/Megatron-LM/pull/4512", id="only-a-link"),
        pytest.param("[see here](https://example.com/a/very/long/path)", id="only-a-markdown-link"),
        pytest.param("## Summary\nN/A\n\n## Checklist\n- [x] Tests pass", id="placeholder"),
        pytest.param("## Summary\nFix typo.\n\nThe old text said teh where it meant the word the.", id="too-short"),
        pytest.param("## 描述\n这个PR修复了检查点保存时的挂起问题。\n", id="chinese"),
        pytest.param("## Zusammenfassung\nDiese Änderung behebt den Fehler beim Speichern.", id="heading-in-german"),
        pytest.param("megatron/core/a.py megatron/core/b.py megatron/core/c.py", id="paths"),
        pytest.param("```python\nThis is code that reads like a sentence of prose.\n```", id="code-fence"),
        pytest.param("> This quotes the issue that this change fixes in some detail.", id="quote"),
        pytest.param("## Changes\n" + " ".join(["word"] * (MAX_WORDS + 1)) + ".", id="too-long"),
        pytest.param("- **Summary:** **Summary:** ", id="list-of-labels"),
        pytest.param("## Summary\nMoves `List<int>` to the new module of the trainer.", id="angle-brackets-in-code"),
        pytest.param(
            "## Summary\nAdds the thing.<!-- Fixes the hang in the loader of checkpoints. -->", id="short-then-comment"
        ),
    ],
)
def test_no_sentence(body: str | None) -> None:
    assert summary_sentence(body) is None


def test_a_summary_section_comes_before_the_text_above_the_first_heading() -> None:
    body = "Some context from the issue tracker about this.\n\n## Summary\nAdds retries to the checkpoint loader."
    assert summary_sentence(body) == "Adds retries to the checkpoint loader."


def test_an_unclosed_comment_hides_the_rest_as_on_github() -> None:
    assert summary_sentence("<!-- Adds retries to the checkpoint loader of the trainer.") is None
    assert summary_sentence("Adds retries to the loader of checkpoints.<!--" + "x" * 65_000) == (
        "Adds retries to the loader of checkpoints."
    )


def test_links_keep_their_text_and_no_address_survives() -> None:
    assert summary_sentence("Click [here](javascript:alert(1)) to see the new dashboard page.") == (
        "Click here to see the new dashboard page."
    )
    assert summary_sentence("Ports [a [nested] fix](https://x.example) from upstream to the trainer.") == (
        "Ports [a [nested] fix from upstream to the trainer."
    )
    sentence = summary_sentence("Adds the new optimizer to the trainer (mail eharper@nvidia.com or @NVIDIA/core).")
    assert sentence is not None and "@" not in sentence and "nvidia.com" not in sentence


# --- hostile bodies: each is answered, whatever its size (bench/hostile_inputs.py times them) --------------


@pytest.mark.parametrize(
    "body",
    [
        pytest.param("a " * 32_768, id="65536-char-single-line"),
        pytest.param("x" + " " * 65_534 + "y", id="whitespace-run"),
        pytest.param("[" * 65_536, id="open-brackets"),
        pytest.param("[a](" * 16_384, id="unclosed-links"),
        pytest.param("[a]((b)" * 9_000, id="nested-parentheses"),
        pytest.param("`" * 10_000 + " adds the thing", id="10000-backticks"),
        pytest.param("Adds " + " ".join("`" * n for n in range(1, 360)), id="backtick-runs-of-every-length"),
        pytest.param("<!--" * 16_384, id="comment-openings"),
        pytest.param("http://" * 9_000, id="url-schemes"),
        pytest.param(("a" * 63 + "@") * 1_000, id="email-like"),
        pytest.param("#1" * 32_768, id="references"),
        pytest.param("*_" * 32_768, id="emphasis"),
        pytest.param("a\n" * 32_768, id="lines"),
        pytest.param("- x\n" * 16_000, id="list-items"),
        pytest.param("Summary: a\n" * 6_000, id="summary-labels"),
        pytest.param("#\n" * 32_768, id="empty-headings"),
        pytest.param("1\n" * 32_768, id="digit-lines"),
        pytest.param("(" * 32_768 + ")" * 32_768, id="parentheses"),
        pytest.param("Adds it.\u200b" * 7_000, id="zero-width"),
    ],
)
def test_hostile_bodies_are_answered(body: str) -> None:
    finishes(lambda: summary_sentence(body))


_UNSAFE = re.compile(r"://|@[^\W\d_]|<|>")

_MARKDOWN_PIECES = st.sampled_from(
    [
        "# What does this PR do ?\n",
        "## Summary\n",
        "**Summary:** ",
        "Summary: ",
        "- ",
        "- [ ] ",
        "\n",
        "\n\n",
        "<!--",
        "-->",
        "`",
        "```\n",
        "[",
        "](",
        ")",
        "![",
        "https://evil.example/x",
        "javascript:alert(1)",
        "www.evil.example",
        "@alice",
        "@NVIDIA/core",
        "me@example.com",
        "#123",
        "<script>",
        "<",
        ">",
        "&lt;",
        "&#64;bob",
        "Adds the new optimizer to the trainer",
        "Fixes the hang",
        ". ",
        "e.g. ",
        "v0.17.0",
        "\u200b",
        "**",
        "_",
        ":rocket:",
        "🚀",
        "| a | b |\n",
    ]
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(_MARKDOWN_PIECES, st.text(max_size=12)), max_size=40).map("".join))
def test_a_sentence_is_short_and_clean_whatever_the_body(body: str) -> None:
    sentence = summary_sentence(body)
    if sentence is not None:
        assert len(sentence.split()) <= MAX_WORDS
        assert not _UNSAFE.search(sentence), sentence
        assert sentence[-1] in ".!?\"')]”’"
        assert summary_sentence(body) == sentence


@needs_shared
def test_github_example_bodies() -> None:
    """GitHub's own example deliveries: one body of prose, one null."""
    assigned = json.loads((WEBHOOKS / "pull_request.assigned.json").read_text())["pull_request"]["body"]
    assert summary_sentence(assigned) == "This is a pretty simple change that we need to pull into master."
    null = json.loads((WEBHOOKS / "pull_request.opened.with-null-body.json").read_text())["pull_request"]["body"]
    assert summary_sentence(null) is None


def test_a_remembered_sentence_follows_its_body() -> None:
    """Short bodies are remembered by their text, long ones are not: an edited body, short or long, gives its
    own sentence, and the same body the same sentence as a fresh reading."""
    from tracker.core import descriptions

    template = MEGATRON.replace("\n{description}", "\n{description}" + "\nPadding line for the long form." * 400)
    for shape in (MEGATRON, template):
        first = shape.format(description="Adds a paged KV cache to the inference engine.")
        second = shape.format(description="Removes the legacy data loader from the training loop.")
        assert (len(first) <= descriptions._REMEMBERED) == (shape is MEGATRON)
        for _ in range(2):
            assert summary_sentence(first) == "Adds a paged KV cache to the inference engine."
            assert summary_sentence(second) == "Removes the legacy data loader from the training loop."
        assert descriptions._summary_sentence(first) == summary_sentence(first)
