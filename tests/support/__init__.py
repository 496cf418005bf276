"""What the tests share, besides the fixtures of tests/conftest.py.

- `app`: the app in this process: signed deliveries posted to its webhook, its queued jobs run by a
  burst worker, a month of stories delivered.
- `months`: months delivered once in a session, each test starting from a copy of one's database.
- `processes`: the `tracker` command as a real process: free ports, a clean environment, waiting for
  health, for deliveries processed, for a condition (tests using these carry the `system` marker).
- `clock`: instants written as text, as epoch seconds (`utc`) or datetimes (`at`).
- `tracking`: a ledger fed by hand, without Redis or GitHub.
- `bullets`: a rendered report's bullets read back.
- `fake_openai`: a local OpenAI-compatible server.

The fakes and factories the benchmarks use too (paths of the shared data, pull-request deliveries,
the fake GitHub, its REST "world", the Megatron-LM month) are in bench/fixtures/, since the benchmarks
and tools must not import the test suite.
"""
