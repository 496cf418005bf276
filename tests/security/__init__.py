"""Each probe of issue 8 replayed against the service, asserting the safe behaviour."""
