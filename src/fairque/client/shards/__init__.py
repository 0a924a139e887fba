"""Where a client's calls go: the placement seam (``placement``), the one-shard
placement (``one``), the sharded one (``spread``, with ``choose`` and its merged ``reads``,
``rules`` and ``schedules``), the layout's flows (``layout``) and the client part that holds a
placement (``placed``)."""
