"""Every Python example of the documentation site runs against a real server.

The ``python`` code blocks of each page under ``docs/`` are run in order, as one script
per page (so a later block may use what an earlier one defined), in a fresh interpreter
in a temporary working directory. Before running, the page's server URL
(``redis://127.0.0.1:6379/0``) becomes the suite's server and every ``queue="..."``
gets a suffix unique to the run, so pages never share a queue. The pages run on Valkey
and on the three-node cluster.

A block preceded by the MyST comment line ``% not run: <why>`` is left out; use it only
for fragments that cannot run on their own. A block preceded by ``% file: <name>`` is
laid out as the page tells the reader to: written to that file in the working
directory rather than into the script, so the script must import it as a reader's
program would.

The ``fairque`` command lines of the ``bash`` blocks are not run (they start servers and
workers), but each is checked against the command line itself: the command exists and
takes every option the page gives it.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import typer.main
from helpers.servers import ServerInfo

from fairque.cli import app

pytestmark = pytest.mark.server_kinds("valkey", "cluster")

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGE_URL = "redis://127.0.0.1:6379/0"
SKIP = "% not run:"
FILE = "% file:"
_FENCE = re.compile(r"^(?P<fence>```+|~~~+)\s*(?P<lang>[^\s`{]*)\s*$")


def fenced(text: str) -> list[tuple[str, str, str]]:
    """Each fenced block of a Markdown text: (language, the MyST comment line before
    it or "", body)."""
    blocks: list[tuple[str, str, str]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if match is None:
            i += 1
            continue
        fence, lang = match["fence"], match["lang"]
        before = lines[i - 1].strip() if i > 0 else ""
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() != fence:
            body.append(lines[i])
            i += 1
        i += 1
        blocks.append((lang, before if before.startswith("%") else "", "\n".join(body) + "\n"))
    return blocks


def code_blocks(text: str, language: str = "python") -> list[str]:
    """The fenced blocks of ``language`` that make a page's script (not those marked
    not run, nor those laid out as files)."""
    return [
        body
        for lang, before, body in fenced(text)
        if lang == language and not before.startswith((SKIP, FILE))
    ]


def page_files(text: str) -> dict[str, str]:
    """The Python blocks a page lays out as files of their own: name -> text."""
    return {
        before.removeprefix(FILE).strip(): body
        for lang, before, body in fenced(text)
        if lang == "python" and before.startswith(FILE)
    }


def pages() -> list[Path]:
    """The site's Markdown pages that hold Python examples."""
    found = []
    for path in sorted(DOCS.rglob("*.md")):
        parts = path.relative_to(DOCS).parts
        if parts[0].startswith("_"):
            continue
        if code_blocks(path.read_text()):
            found.append(path)
    return found


def pointed(code: str, url: str, suffix: str) -> str:
    """``code`` pointed at ``url``, with every queue name made unique by ``suffix``."""
    return re.sub(r'queue="([^"]+)"', rf'queue="\1-{suffix}"', code.replace(PAGE_URL, url))


def page_script(text: str, url: str, suffix: str) -> str:
    """One script from a page's examples, pointed at ``url`` with unique queue names."""
    return pointed("\n".join(code_blocks(text)), url, suffix)


def lay_out(page: Path, url: str, folder: Path, *, drop: str = "") -> Path:
    """Write a page's script and files into ``folder`` as a reader lays them out (less
    any line equal to ``drop``); returns the script."""
    text = page.read_text()
    suffix = uuid.uuid4().hex[:8]
    for name, body in page_files(text).items():
        (folder / name).write_text(pointed(body, url, suffix))
    script = folder / "example.py"
    lines = page_script(text, url, suffix).splitlines(keepends=True)
    script.write_text("".join(line for line in lines if line.rstrip() != drop or not drop))
    return script


def run_script(script: Path) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a fresh interpreter in its own folder, without FAIRQUE_ settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAIRQUE_")}
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=script.parent,
        capture_output=True,
        text=True,
        timeout=90,
        env=env,
        check=False,
    )


def test_code_blocks_are_found_and_skipped_as_marked() -> None:
    text = (
        "# T\n\n```python\nx = 1\n```\n\n% not run: a fragment\n```python\nboom(\n```\n\n"
        "````python\ny = '```'\n````\n\n```bash\nls\n```\n"
    )
    assert code_blocks(text) == ["x = 1\n", "y = '```'\n"]
    page = '```python\nq = X("redis://127.0.0.1:6379/0", queue="a")\n```\n'
    assert page_script(page, "redis://h:1/0", "s") == 'q = X("redis://h:1/0", queue="a-s")\n'


def test_the_pages_with_examples_include_the_quick_start() -> None:
    names = {p.relative_to(DOCS).as_posix() for p in pages()}
    assert {"quickstart.md", "concepts.md", "howto/workflows.md"} <= names


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.relative_to(DOCS).as_posix())
def test_page_examples_run(page: Path, server: ServerInfo, tmp_path: Path) -> None:
    proc = run_script(lay_out(page, server.url, tmp_path))
    assert proc.returncode == 0, f"{page.name}:\n{proc.stdout}\n{proc.stderr}"


def test_files_are_laid_out_apart_from_the_script() -> None:
    text = "% file: tasks.py\n```python\nX = 1\n```\n\n```python\nimport tasks\n```\n"
    assert page_files(text) == {"tasks.py": "X = 1\n"}
    assert code_blocks(text) == ["import tasks\n"]


@pytest.mark.parametrize("server", ["valkey"], indirect=True)
def test_the_quick_start_fails_without_importing_its_handlers(
    server: ServerInfo, tmp_path: Path
) -> None:
    # laid out as the page says, the worker has no handler unless the script imports
    # tasks.py: what joining every block into one script used to hide
    page = DOCS / "quickstart.md"
    assert "tasks.py" in page_files(page.read_text())
    proc = run_script(
        lay_out(page, server.url, tmp_path, drop="import tasks  # registers send_email")
    )
    assert proc.returncode != 0
    assert "AssertionError" in proc.stderr


def command_lines(text: str) -> list[str]:
    """The ``fairque ...`` lines of a page's bash blocks (continuations joined)."""
    found = []
    for block in code_blocks(text, "bash"):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip()
            if line.startswith("fairque "):
                found.append(line)
    return found


def _options(command: Any) -> dict[str, Any]:
    return {
        name: param
        for param in command.params
        if param.param_type_name == "option"
        for name in [*param.opts, *param.secondary_opts]
    }


def check_command_line(line: str) -> None:
    """Raise AssertionError when ``line`` names a command or option that does not exist."""
    words = [w for w in shlex.split(line, comments=True) if w != "&"][1:]
    root = typer.main.get_command(app)
    shared = _options(root)
    command: Any = root
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if word.startswith("-"):
            name = word.split("=", 1)[0]
            param = _options(command).get(name) or shared.get(name)
            assert param is not None, f"{line!r}: {command.name} has no option {name}"
            takes_value = not (param.is_flag or param.count)
            if takes_value and "=" not in word:
                i += 1
        elif hasattr(command, "list_commands"):
            ctx = command.context_class(command, info_name=command.name)
            sub = command.get_command(ctx, word)
            assert sub is not None, f"{line!r}: no command {word!r}"
            command = sub


def test_command_line_check_finds_drift() -> None:
    check_command_line("fairque worker --url redis://h:1/0 --queue a --import m --burst &")
    check_command_line("fairque --queue a schedule list")
    with pytest.raises(AssertionError, match="no command"):
        check_command_line("fairque wrker --queue a")
    with pytest.raises(AssertionError, match="no option --colour"):
        check_command_line("fairque status --colour")


def _all_pages() -> list[Path]:
    docs = [p for p in sorted(DOCS.rglob("*.md")) if p.relative_to(DOCS).parts[0][0] not in "_"]
    return [DOCS.parent / "README.md", *docs]


def test_command_lines_are_found() -> None:
    lines = [line for page in _all_pages() for line in command_lines(page.read_text())]
    assert any(line.startswith("fairque worker ") for line in lines)
    assert len(lines) >= 10


@pytest.mark.parametrize("page", _all_pages(), ids=lambda p: p.relative_to(DOCS.parent).as_posix())
def test_page_command_lines_exist(page: Path) -> None:
    for line in command_lines(page.read_text()):
        check_command_line(line)
