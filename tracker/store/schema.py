"""The ledger's tables (SQLAlchemy Core), the same on SQLite and PostgreSQL.

`deliveries` and `hooks` are the source of truth. Everything under DERIVED is computed from the
stored deliveries and can be dropped and rebuilt (`tracker rebuild`). Instants are UTC epoch
seconds (GitHub stamps to the second); `received_at` is epoch milliseconds.

Every change here needs an Alembic revision in tracker/store/migrations/versions/ that makes it (an
installed ledger only changes through `tracker migrate`); tests/store/test_migrations.py fails while
the revisions' result and these tables differ.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
)

metadata = MetaData()

# --- source of truth ------------------------------------------------------------------------

deliveries = Table(
    "deliveries",
    metadata,
    Column("id", String(100), primary_key=True),  # X-GitHub-Delivery, kept by GitHub on redelivery
    Column("event", String(64), nullable=False),
    Column("action", String(64)),
    Column("repo", String(255)),
    Column("hook_id", String(32)),
    Column("content_type", String(100), nullable=False),
    Column("headers", Text, nullable=False),  # JSON of the headers that matter
    Column("body", LargeBinary, nullable=False),  # the raw bytes GitHub signed
    Column("received_at", BigInteger, nullable=False),
    # pending -> processed, or pending -> failed after the last retry
    Column("status", String(16), nullable=False, default="pending"),
    Column("attempts", Integer, nullable=False, default=0),
    Column("last_error", Text),
    Column("processed_at", BigInteger),
)
Index("ix_deliveries_status_received", deliveries.c.status, deliveries.c.received_at)

# One row per distinct body of a repository: a captured delivery posted again under a new
# X-GitHub-Delivery id (the signature covers the body, not the headers) is a duplicate, not news.
delivery_digests = Table(
    "delivery_digests",
    metadata,
    Column("repo", String(255), primary_key=True),  # repository key (lower case)
    Column("digest", String(64), primary_key=True),  # SHA-256 of the JSON document, hex
    Column("delivery_id", String(100), nullable=False),
)

hooks = Table(
    "hooks",
    metadata,
    Column("hook_id", String(32), primary_key=True),
    Column("hook_type", String(64)),
    Column("events", Text, nullable=False),  # JSON list
    Column("target", String(255)),
    Column("first_ping_at", BigInteger, nullable=False),
    Column("last_ping_at", BigInteger, nullable=False),
    Column("pings", Integer, nullable=False),
)

# --- DERIVED: rebuilt from deliveries -------------------------------------------------------

# Derived tables key a repository by its lower-cased full name (GitHub matches names without
# regard to case, and a repository can be renamed to another case). The spelling shown is the one
# of the latest delivery, by (updated_at, delivery id), so it does not depend on arrival order.
repositories = Table(
    "repositories",
    metadata,
    Column("repo", String(255), primary_key=True),
    Column("full_name", String(255), nullable=False),
    Column("named_at", BigInteger, nullable=False),
    Column("named_by", String(100), nullable=False),
)

# A fact's identity is (repo, number, kind, ident): `ident` is the head sha of commit activity when it
# is known (a push is the same push whoever reported it), else the instant itself. Several sources
# may give one identity different instants; a report uses the best: the lowest `rank` (0 a webhook
# delivery, 1 a time GitHub recorded for the event, 2 a commit's own date), then the earliest.
pr_facts = Table(
    "pr_facts",
    metadata,
    Column("repo", String(255), primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("kind", String(16), primary_key=True),
    Column("ident", String(64), primary_key=True),
    Column("at", BigInteger, primary_key=True),
    Column("rank", Integer, nullable=False),
    Column("source", String(16), nullable=False),  # webhook, backfill, reconciliation
)

pr_versions = Table(
    "pr_versions",
    metadata,
    Column("repo", String(255), primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("at", BigInteger, primary_key=True),
    Column("delivery_id", String(100), primary_key=True),  # or the id of an observation
    # 1 when a webhook delivery carried the PR as it was then; 0 when rebuilt from GitHub's timeline
    # (its body is today's). At one instant the delivery's version wins.
    Column("observed", Integer, nullable=False),
    Column("title", Text, nullable=False),
    Column("body", Text, nullable=False),
    Column("base_ref", String(255), nullable=False),
    Column("head_ref", String(255), nullable=False),
    Column("head_sha", String(64), nullable=False),
    Column("labels", Text, nullable=False),  # JSON list, sorted
    Column("draft", Boolean, nullable=False),
    Column("author", String(255), nullable=False),
)

# Which PRs have facts in which month (in the repository's time zone), so that a month's snapshot
# reads only that month's PRs.
month_activity = Table(
    "month_activity",
    metadata,
    Column("repo", String(255), primary_key=True),
    Column("month", String(7), primary_key=True),
    Column("number", Integer, primary_key=True),
)

# Since when webhook deliveries cover a repository: the earliest instant a delivery stamped.
webhook_coverage = Table(
    "webhook_coverage",
    metadata,
    Column("repo", String(255), primary_key=True),
    Column("since", BigInteger, nullable=False),
)

# A counter per month that changes whenever something the month's report reads may have changed.
months = Table(
    "months",
    metadata,
    Column("repo", String(255), primary_key=True),
    Column("month", String(7), primary_key=True),
    Column("version", BigInteger, nullable=False),
)

# Which PRs each version of a month changed: the PR numbers whose rows the transaction that moved the
# month to `version` wrote (none for the narrator's prose). A request that finds the month's digest a few
# versions old reads these PRs again instead of the whole month (tracker.reports.digests). The newest
# CHANGES_KEPT versions of each month are kept (tracker.store.changes).
month_changes = Table(
    "month_changes",
    metadata,
    Column("repo", String(255), primary_key=True),
    Column("month", String(7), primary_key=True),
    Column("version", BigInteger, primary_key=True),
    Column("numbers", Text, nullable=False),  # JSON list, ascending
)

# Facts about the ledger itself: `generation` changes with every rebuild, so caches keyed by a
# month's version never mistake a rebuilt month for the one before.
ledger_meta = Table(
    "ledger_meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", String(255), nullable=False),
)

# --- history read from GitHub's REST API (backfill, reconciliation): a source of truth, like deliveries -----

# What GitHub said of one PR at one moment: the PR object and its issue timeline, as JSON. The id
# holds a digest of the document, so reading an unchanged PR again adds nothing.
observations = Table(
    "observations",
    metadata,
    Column("id", String(120), primary_key=True),
    Column("repo", String(255), nullable=False),  # repository key (lower case)
    Column("number", Integer, nullable=False),
    Column("source", String(16), nullable=False),  # backfill or reconciliation
    Column("fetched_at", BigInteger, nullable=False),  # epoch milliseconds
    Column("document", LargeBinary, nullable=False),
)
Index("ix_observations_repo_number", observations.c.repo, observations.c.number)

# One backfill or reconciliation run: its range, where it is, and what it cost. A run interrupted
# resumes under the same id and skips the PRs listed in `history_done`.
history_runs = Table(
    "history_runs",
    metadata,
    Column("id", String(320), primary_key=True),
    Column("repo", String(255), nullable=False),
    Column("full_name", String(255), nullable=False),
    Column("kind", String(16), nullable=False),  # backfill or reconciliation
    Column("range_start", BigInteger, nullable=False),  # epoch seconds
    Column("range_end", BigInteger, nullable=False),
    Column("state", String(16), nullable=False),  # queued, running, waiting, done, failed
    Column("started_at", BigInteger, nullable=False),  # epoch milliseconds
    Column("updated_at", BigInteger, nullable=False),
    Column("finished_at", BigInteger),
    Column("total", Integer, nullable=False),
    Column("done", Integer, nullable=False),
    Column("requests", Integer, nullable=False),
    Column("not_modified", Integer, nullable=False),
    Column("detail", Text),
)

history_done = Table(
    "history_done",
    metadata,
    Column("run_id", String(320), primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("outcome", String(16), nullable=False),  # recorded, unchanged, gone
)

# Intervals whose history is complete because a backfill or a reconciliation read all of it.
coverage = Table(
    "coverage",
    metadata,
    Column("repo", String(255), primary_key=True),
    Column("source", String(16), primary_key=True),
    Column("start_at", BigInteger, primary_key=True),  # epoch seconds
    Column("end_at", BigInteger, nullable=False),
)

# The GitHub App installation a repository's deliveries named (the `installation` field of an app's
# webhooks), so a GitHub App token can be made for it.
installations = Table(
    "installations",
    metadata,
    Column("repo", String(255), primary_key=True),  # repository key (lower case)
    Column("full_name", String(255), nullable=False),
    Column("installation_id", BigInteger, nullable=False),
    Column("seen_at", BigInteger, nullable=False),  # epoch milliseconds
)

# --- fetched from GitHub: kept by rebuilds (re-fetching would cost quota) --------------------

# The changed files of one head of one PR, as GitHub listed them.
head_files = Table(
    "head_files",
    metadata,
    Column("repo", String(255), primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("head_sha", String(64), primary_key=True),
    Column("position", Integer, primary_key=True),
    Column("path", Text, nullable=False),
    Column("status", String(32), nullable=False),
    Column("previous_path", Text),
    Column("additions", Integer, nullable=False),
    Column("deletions", Integer, nullable=False),
    Column("patch", Text),
)

# One row per head whose files are stored (a head with no files has a row and no files).
heads = Table(
    "heads",
    metadata,
    Column("repo", String(255), primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("head_sha", String(64), primary_key=True),
    Column("file_count", Integer, nullable=False),
    Column("truncated", Boolean, nullable=False),
    Column("source", String(16), nullable=False),  # "pulls" (files endpoint) or "compare"
    Column("fetched_at", BigInteger, nullable=False),
)

# Conditional requests: the ETag and body of the last 200 for a URL, replayed on a 304.
http_cache = Table(
    "http_cache",
    metadata,
    Column("url", String(1000), primary_key=True),
    Column("etag", String(255), nullable=False),
    Column("next_url", Text),
    Column("body", LargeBinary, nullable=False),
    # Epoch milliseconds: when the entry was stored or last answered a 304 (to the day). Entries unused
    # for TRACKER_HTTP_CACHE_RETENTION_DAYS are dropped (workers.retention); the next request is a plain one.
    Column("used_at", BigInteger, nullable=False),
)
Index("ix_http_cache_used_at", http_cache.c.used_at)

# --- the months' records: kept for ever, never derived (a rebuild keeps them) ----------------------

# A month's final report, frozen: every format's bytes, and what it was built from. Revision 1 is the
# first finalisation; a forced re-finalisation adds the next revision and keeps the earlier ones. The
# primary key decides races: two schedulers finalising one month store exactly one revision 1.
month_records = Table(
    "month_records",
    metadata,
    Column("repo", String(255), primary_key=True),  # repository key (lower case)
    Column("month", String(7), primary_key=True),
    Column("revision", Integer, primary_key=True),
    Column("full_name", String(255), nullable=False),  # as the repository spelled itself
    Column("cutoff", String(10), nullable=False),  # the last day, or the day a forced finalisation ran
    Column("created_at", BigInteger, nullable=False),
    Column("trigger", String(16), nullable=False),  # "schedule", "api", "cli"
    Column("forced", Boolean, nullable=False),
    # The ledger position it was built from: the month's change counter, the ledger's generation, and
    # how many deliveries had been received and processed.
    Column("month_version", BigInteger, nullable=False),
    Column("generation", String(64), nullable=False),
    Column("deliveries_received", BigInteger, nullable=False),
    Column("deliveries_processed", BigInteger, nullable=False),
    Column("config_hash", String(64), nullable=False),
    Column("content_hash", String(64), nullable=False),  # SHA-256 over the five documents below
    Column("pending", Text, nullable=False),  # JSON: what was still pending when it was frozen
    Column("markdown_en", Text, nullable=False),
    Column("markdown_zh", Text, nullable=False),
    Column("html_en", Text, nullable=False),
    Column("html_zh", Text, nullable=False),
    Column("json", Text, nullable=False),
)

# A group's months' records (tracker.records.groups): the group's report over every member, frozen as a
# repository's month is, with what each member was read from instead of a ledger position.
group_records = Table(
    "group_records",
    metadata,
    Column("group_key", String(64), primary_key=True),  # the group's name in lower case
    Column("month", String(7), primary_key=True),
    Column("revision", Integer, primary_key=True),
    Column("name", String(64), nullable=False),  # as configured
    Column("cutoff", String(10), nullable=False),  # the last day, or the day a forced finalisation ran
    Column("created_at", BigInteger, nullable=False),
    Column("trigger", String(16), nullable=False),  # "schedule", "api", "cli"
    Column("forced", Boolean, nullable=False),
    # JSON: each member and what it was read from (its record's revision and content hash, or its live report).
    Column("members", Text, nullable=False),
    Column("config_hash", String(64), nullable=False),
    Column("content_hash", String(64), nullable=False),  # SHA-256 over the five documents below
    Column("pending", Text, nullable=False),  # JSON: the members read live (no record) when it was frozen
    Column("markdown_en", Text, nullable=False),
    Column("markdown_zh", Text, nullable=False),
    Column("html_en", Text, nullable=False),
    Column("html_zh", Text, nullable=False),
    Column("json", Text, nullable=False),
)

# Every publication of a month (files, a GitHub issue): what, where, when, and how it went. A group's are kept
# under `group:<name in lower case>` in `repo` (no repository's name holds a colon).
publications = Table(
    "publications",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("repo", String(255), nullable=False),  # repository key, or `group:<key>`
    Column("month", String(7), nullable=False),
    Column("kind", String(16), nullable=False),  # "files" or "issue"
    Column("edition", String(16), nullable=False),  # "final" or "partial"
    Column("target", Text, nullable=False),  # a directory, or owner/name#number
    Column("content_hash", String(64), nullable=False),
    Column("at", BigInteger, nullable=False),
    Column("result", String(16), nullable=False),  # created, updated, reopened, unchanged, written, failed
    Column("detail", Text),
)
Index("ix_publications_repo_month", publications.c.repo, publications.c.month, publications.c.at)

# --- DERIVED from deliveries and fetched files ------------------------------------------------

# Heads seen in deliveries that should have files (opened, synchronize, reopened, merge).
wanted_heads = Table(
    "wanted_heads",
    metadata,
    Column("repo", String(255), primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("head_sha", String(64), primary_key=True),
    Column("full_name", String(255), nullable=False),
    Column("base_sha", String(64), nullable=False),
)

# The verdict of a head's files under the repository's rules (recomputed by `tracker rebuild`).
head_verdicts = Table(
    "head_verdicts",
    metadata,
    Column("repo", String(255), primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("head_sha", String(64), primary_key=True),
    Column("category", String(16), nullable=False),
    Column("whitespace_only", Boolean, nullable=False),
    Column("evidence", Text, nullable=False),  # JSON
)

DERIVED_TABLES = (
    repositories,
    pr_facts,
    pr_versions,
    month_activity,
    months,
    month_changes,
    webhook_coverage,
    wanted_heads,
    head_verdicts,
)
# Changes whenever a derived table changes shape: a ledger whose derived tables are older is rebuilt
# from its sources (`tracker rebuild`, which `tracker run` does by itself) before it is used.
DERIVED_SCHEMA = "2"

# The language-model narrator's validated prose (tracker.narration.store), by what it describes: not
# derived from the ledger (a rebuild keeps it; asking the model again costs money).
narrations = Table(
    "narrations",
    metadata,
    Column("repo", String(255), primary_key=True),  # repository key (lower case)
    Column("month", String(7), primary_key=True),
    Column("section", String(32), primary_key=True),  # "delivered", "in_progress"
    Column("content", String(64), primary_key=True),  # `content_digest` of the section's input, hex
    Column("prompt_version", String(32), primary_key=True),
    Column("model", String(255), primary_key=True),
    Column("english", Text),  # SectionProse as JSON; NULL: the deterministic text
    Column("chinese", Text),
    Column("fallbacks", Text, nullable=False),  # JSON list of {section, stage, reason}
    Column("prompt_tokens", Integer, nullable=False),
    Column("completion_tokens", Integer, nullable=False),
    Column("requests", Integer, nullable=False),
    Column("created_at", BigInteger, nullable=False),  # epoch seconds
)

# What the narrator spent on each month, whatever became of the prose: every request it made (answers
# refused, runs cut short by a rate limit, prose pruned since) counted once. Kept for good: it is a bill.
narration_spend = Table(
    "narration_spend",
    metadata,
    Column("repo", String(255), primary_key=True),  # repository key (lower case)
    Column("month", String(7), primary_key=True),
    Column("model", String(255), primary_key=True),
    Column("requests", BigInteger, nullable=False),
    Column("prompt_tokens", BigInteger, nullable=False),
    Column("completion_tokens", BigInteger, nullable=False),
)
