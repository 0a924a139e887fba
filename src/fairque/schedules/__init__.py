"""Schedules: the model (cron and interval slots), the script calls and replies, the
clients' schedule methods and the leader that fires them."""
