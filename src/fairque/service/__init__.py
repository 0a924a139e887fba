"""The HTTP service: ``fairque serve`` (the queue API) and ``fairque dispatch`` (push workers)."""
