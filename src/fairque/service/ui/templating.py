"""The dashboard's templates: their environment and the filters that format figures."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import jinja2

from fairque.models import TaskState

#: shown where a figure is unknown
NONE = "\u2013"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return NONE
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    if seconds < 172_800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86_400:.1f} d"


def _percent(value: float | None) -> str:
    return NONE if value is None else f"{value * 100:.1f} %"


def _when(value: Any) -> str:
    return NONE if value is None else value.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def environment() -> jinja2.Environment:
    """The template environment: autoescape on for every template, undefined is an error."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("fairque.service.ui", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(duration=_duration, percent=_percent, when=_when)
    env.globals.update(urlencode=urlencode, states=[s.value for s in TaskState])
    return env
