"""Month end: a month's final report frozen as its record (`finalize`), kept (`store`), published to files and
an issue (`publish`), by the month-end job (`jobs`), and served and asked for over HTTP (`views`)."""
