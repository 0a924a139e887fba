"""What the clients and the floors above them share, beside the engine.

Redis URLs (checked and redacted), the pauses that survive a swallowed cancellation,
the outward task (the task fields the command line and the HTTP API take), and the
fair-share arithmetic. Nothing here names a key, a hash field or a script argument:
that is the engine's (``fairque.core``), which does no I/O.
"""
