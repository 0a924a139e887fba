"""The dashboard under ``/ui``: server-rendered pages over one ``Service``'s queues."""
