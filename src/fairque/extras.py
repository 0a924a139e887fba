"""What to install for an optional part: the hint every "missing package" error gives.

fairque is installed from a checkout or a wheel, not from PyPI, so a hint never says
``pip install 'fairque[extra]'``: it names the packages the extra brings (read from
the installed distribution's own metadata, so the list cannot drift from
``pyproject.toml``) and how to install the extra from a checkout.
"""

from __future__ import annotations

import re
from importlib import metadata

_EXTRA = re.compile(r"""extra\s*==\s*['"]([^'"]+)['"]""")


def extra_packages(extra: str) -> list[str]:
    """The requirements ``extra`` adds, as the installed fairque declares them."""
    try:
        requires = metadata.requires("fairque") or []
    except metadata.PackageNotFoundError:  # pragma: no cover - run from a bare source tree
        return []
    found = []
    for line in requires:
        requirement, _, marker = line.partition(";")
        match = _EXTRA.search(marker)
        if match and match.group(1) == extra:
            found.append(requirement.strip())
    return found


def install_hint(extra: str) -> str:
    """How to install the ``extra`` part of fairque, for an error message."""
    packages = " ".join(f"'{p}'" for p in extra_packages(extra))
    also = f"pip install {packages}, or " if packages else ""
    return (
        f"{also}install fairque with its {extra!r} extra (pip install '.[{extra}]' in a checkout)"
    )
