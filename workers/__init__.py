"""RQ job functions and the processes that run them."""
