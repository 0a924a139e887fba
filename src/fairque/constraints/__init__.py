"""Constraints: the model (matchers, rate and concurrency limits) and the clients'
constraint methods."""
