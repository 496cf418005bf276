# The tracker's image: one process type per container, given as the command (README, "Compose").
#   docker build --build-arg VERSION=0.2.0 -t tracker .   (VERSION: below)
#   docker run tracker web --host 0.0.0.0 --port 8000    (the default)
#   docker run tracker worker | schedule | sweep --every 60 | migrate
# compose.yaml runs a whole deployment from it. Settings come from the environment (tracker/settings.py);
# a deployment of containers names PostgreSQL (TRACKER_DATABASE_URL) and Redis (REDIS_URL): the
# embedded SQLite ledger and Redis live on one machine's disk, and a container's disk is its own.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# The version `tracker --version` reports. setuptools-scm reads it from git, and the build context has
# no .git (.dockerignore): pass it, e.g. `docker build --build-arg VERSION=0.2.0 -t tracker .` at a
# release tag. Without it the package says 0.0.0+unknown (pyproject.toml's fallback_version).
ARG VERSION=
# Not editable: the templates, the demo month and the schema's revisions ship as package data.
COPY . /src
RUN SETUPTOOLS_SCM_PRETEND_VERSION_FOR_MONTHLY_ACTIVITY_TRACKER="$VERSION" \
    pip install -c /src/constraints.txt '/src[postgres]' && rm -rf /src

RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin tracker
USER tracker
WORKDIR /home/tracker
ENV TRACKER_DATA_DIR=/home/tracker/data

EXPOSE 8000
# For the web process (the only one that listens): 200 while the ledger and Redis answer, else 503.
# compose.yaml turns it off for the other process types.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4).status != 200)"]

ENTRYPOINT ["tracker"]
CMD ["web", "--host", "0.0.0.0", "--port", "8000"]
