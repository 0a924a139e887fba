"""The ``fairque`` command line: commands, their rendering, the demo and the embedded server.

Nothing in the producer or worker API imports this package.
"""

from fairque.cli import constraint, fairness, schedule, service, shards, token
from fairque.cli.commands import app, main

service.register(app)
schedule.register(app)
constraint.register(app)
fairness.register(app)
shards.register(app)
token.register(app)

__all__ = ["app", "main"]
