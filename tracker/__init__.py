"""Monthly activity tracker for GitHub repositories, fed by pull-request webhooks."""

__version__ = "0.1.0"
