"""Fault-injection tests (``-m faults``): worker kills, server restarts, connection cuts."""
