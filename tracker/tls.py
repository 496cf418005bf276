"""The process's one TLS context, shared by every HTTP client the tracker makes (GitHub, the
language model).

Building a context (loading certifi's CA bundle, or SSL_CERT_FILE / SSL_CERT_DIR) costs about 50 ms
of CPU. When every head-fetch job built its own httpx client, that was most of a fetch's cost; a
client made with this context costs about a millisecond.
"""

from __future__ import annotations

import functools
import ssl

import httpx


@functools.cache
def tls_context() -> ssl.SSLContext:
    return httpx.create_ssl_context()
