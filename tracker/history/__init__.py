"""History: what GitHub's REST API says happened, read to fill the gaps of the webhook's deliveries (a backfill)
and to reconcile each repository's recent days (`derive`: pure; `store`: runs and checkpoints; `github`: the
reading; `jobs`: the backfill and reconciliation jobs; `views`: the admin API)."""
