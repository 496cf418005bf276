"""Which GitHub App installation covers a repository, as the App's own webhooks name it.

A GitHub App's deliveries carry `installation.id`; keeping it spares a `GET /repos/{o}/{r}/installation`
before the first installation token for the repository (tracker.github.app).
"""

from __future__ import annotations

from sqlalchemy import Engine, select, update

from tracker.core.repository import check_full_name, repository_key
from tracker.store.database import insert_ignoring_duplicates
from tracker.store.ledger import now_ms
from tracker.store.schema import installations


class InstallationStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def record(self, full_name: str, installation_id: int) -> None:
        """Keep the installation a delivery named for `full_name`; the latest one recorded wins (an App
        uninstalled and installed again gets a new id)."""
        if isinstance(installation_id, bool) or not isinstance(installation_id, int) or installation_id < 1:
            raise ValueError(f"not an installation id: {installation_id!r}")
        row = {
            "repo": repository_key(check_full_name(full_name)),
            "full_name": full_name,
            "installation_id": installation_id,
            "seen_at": now_ms(),
        }
        # Every batch of an App's deliveries names its installation: a read when nothing changed, not a
        # write transaction (`seen_at` is then when it was last recorded as changed).
        with self.engine.connect().execution_options(read_only=True) as conn:
            kept = conn.execute(
                select(installations.c.full_name, installations.c.installation_id).where(
                    installations.c.repo == row["repo"]
                )
            ).first()
        if kept is not None and (kept.full_name, kept.installation_id) == (full_name, installation_id):
            return
        with self.engine.begin() as conn:
            if insert_ignoring_duplicates(conn, installations, [row]):
                return
            conn.execute(update(installations).where(installations.c.repo == row["repo"]).values(**row))

    def installation_for(self, full_name: str) -> int | None:
        """The installation last recorded for `full_name` (any spelling of it), or None."""
        with self.engine.connect().execution_options(read_only=True) as conn:
            found = conn.execute(
                select(installations.c.installation_id).where(installations.c.repo == repository_key(full_name))
            ).scalar_one_or_none()
        return int(found) if found is not None else None
