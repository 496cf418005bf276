"""Monthly activity tracker for GitHub repositories, fed by pull-request webhooks."""

from importlib.metadata import PackageNotFoundError, version

# The installed distribution's version, which setuptools-scm takes from the git tag at install time
# (pyproject.toml). Source run without being installed: the build's own fallback.
try:
    __version__ = version("monthly-activity-tracker")
except PackageNotFoundError:  # pragma: no cover - only a tree on sys.path that pip never installed
    __version__ = "0.0.0+unknown"
