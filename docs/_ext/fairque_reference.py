"""Reference pages generated from the code at build time, so they cannot drift.

- ``_generated/cli.md``: every ``fairque`` command, from the Typer application.
- ``_generated/config.md``: every configuration key with its environment variable,
  type and default, from the settings model (``fairque.config.Settings``).
- ``_generated/http.md``: every endpoint of the HTTP API, from ``docs/openapi.json``.
- ``_generated/keys.md`` and ``scripts.md``: every key of a queue (``QueueKeys``) and
  every Lua script's contract header.

``conf.py`` calls :func:`generate` before Sphinx reads the sources; the pages under
``reference/`` include these files.
"""

from __future__ import annotations

import inspect
import json
import re
import types
import typing
from pathlib import Path
from typing import Any, Union

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>|#{}$])")


def _escape(text: str) -> str:
    """Plain text, safe inside Markdown (and a table cell)."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", " ".join(text.split()))


def _rich(text: str) -> str:
    """Docstring text for Markdown: ````code```` stays code, the rest is escaped."""
    parts = re.split(r"``(.+?)``", " ".join(text.split()))
    return "".join(
        _code(part) if i % 2 else _MARKDOWN_SPECIAL.sub(r"\\\1", part)
        for i, part in enumerate(parts)
    )


def _code(text: str) -> str:
    """Inline code that may hold backticks."""
    fence = "``" if "`" in text else "`"
    return f"{fence}{text}{fence}" if fence == "`" else f"{fence} {text} {fence}"


# ---------------------------------------------------------------------------- CLI


def _commands(group: Any, path: list[str]) -> list[tuple[list[str], Any]]:
    """The command and its subcommands, depth first (duck-typed: Typer vendors Click)."""
    found = [(path, group)]
    if hasattr(group, "list_commands"):
        ctx = group.context_class(group, info_name=" ".join(path))
        for name in group.list_commands(ctx):
            sub = group.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                found += _commands(sub, [*path, name])
    return found


def _param_row(param: Any, ctx: Any) -> str:
    record = param.get_help_record(ctx)
    if record is not None:
        names, help_text = record
    else:
        names = f"{(param.name or '').upper()} {param.display_type(ctx)}"
        help_text = getattr(param, "help", None) or ""
    if param.param_type_name == "argument":
        names = (param.name or "").upper()
        help_text = (help_text + (" [required]" if param.required else " [optional]")).strip()
    if param.envvar and "env var" not in help_text:
        envvars = [param.envvar] if isinstance(param.envvar, str) else list(param.envvar)
        help_text += f" [env var: {', '.join(envvars)}]"
    if getattr(param, "multiple", False):
        help_text += " [may be repeated]"
    return f"| {_code(names)} | {_escape(help_text)} |"


def cli_markdown() -> str:
    """Markdown for every command of ``fairque``."""
    import typer.main

    from fairque.cli import app

    root = typer.main.get_command(app)
    lines = ["<!-- generated from fairque.cli at build time; do not edit -->", ""]
    for path, command in _commands(root, ["fairque"]):
        title = " ".join(path)
        lines += [f"## `{title}`", ""]
        if command.help:
            help_text = command.help.split("\f")[0].strip()
            lines += [_escape(paragraph) + "\n" for paragraph in help_text.split("\n\n")]
        ctx = command.context_class(command, info_name=title)
        usage = " ".join(command.collect_usage_pieces(ctx))
        lines += ["```text", f"{title} {usage}".rstrip(), "```", ""]
        params = [p for p in command.params if not getattr(p, "hidden", False)]
        if params:
            lines += ["| option | description |", "| --- | --- |"]
            lines += [_param_row(p, ctx) for p in params]
            lines.append("")
        if hasattr(command, "list_commands"):
            subs = command.list_commands(ctx)
            if subs:
                lines += ["Commands: " + ", ".join(f"`{title} {s}`" for s in subs) + ".", ""]
    return "\n".join(lines)


# -------------------------------------------------------------------- configuration


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (Union, types.UnionType):
        return " | ".join(_type_name(a) for a in args)
    if origin is typing.Literal:
        return " | ".join(json.dumps(a) for a in args)
    if origin is not None:
        inner = ", ".join(_type_name(a) for a in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    if annotation is type(None):
        return "null"
    return getattr(annotation, "__name__", str(annotation))


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _attribute_docs(model: type[BaseModel]) -> dict[str, str]:
    """The ``#:`` comments and docstrings of a model's fields, from its source."""
    docs: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)) or cls is BaseModel:
            continue
        try:
            from sphinx.pycode import ModuleAnalyzer  # the site build has Sphinx

            analyzer = ModuleAnalyzer.for_module(cls.__module__)
        except Exception:
            continue
        for (owner, name), comment in analyzer.find_attr_docs().items():
            if owner == cls.__qualname__:
                docs[name] = " ".join(line.strip() for line in comment if line.strip())
    return docs


def _docstring_attributes(model: type[BaseModel]) -> dict[str, str]:
    """The ``Attributes:`` section of a model's (Google-style) docstring."""
    found: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        doc = inspect.cleandoc(cls.__doc__ or "") if cls is not BaseModel else ""
        lines = doc.splitlines()
        if "Attributes:" not in lines:
            continue
        name = None
        for line in lines[lines.index("Attributes:") + 1 :]:
            if line and not line.startswith(" "):
                break
            match = re.match(r"^    (\w+): (.*)$", line)
            if match:
                name = match[1]
                found[name] = match[2]
            elif name and line.startswith("        "):
                found[name] += " " + line.strip()
            elif not line.strip():
                name = None
    return found


def _template_comments(path: Path) -> dict[str, str]:
    """``section.key`` -> the comment beside it in the commented YAML template."""
    found: dict[str, str] = {}
    section = None
    last = None
    for line in path.read_text().splitlines():
        top = re.match(r"^(\w+):", line)
        if top:
            section, last = top[1], None
            continue
        item = re.match(r"^  (\w+):[^#]*(?:#\s*(.*))?$", line)
        if item and section:
            last = f"{section}.{item[1]}"
            if item[2]:
                found[last] = item[2].strip()
            continue
        more = re.match(r"^\s+#\s*(.*)$", line)
        if more and last in found:
            found[last] += " " + more[1].strip()
        else:
            last = None
    return found


def _default(info: FieldInfo) -> str:
    if info.default_factory is not None:
        try:
            value = info.default_factory()  # type: ignore[call-arg]
        except TypeError:
            return "(computed)"
        if isinstance(value, BaseModel):
            return ""
        if callable(info.default_factory) and info.default_factory.__name__.startswith("default_"):
            return "(computed)"
        return json.dumps(value)
    if info.default is PydanticUndefined:
        return "(required)"
    value = info.default
    if hasattr(value, "get_secret_value"):
        return "(secret)"
    return json.dumps(value, default=str)


def _config_rows(
    model: type[BaseModel],
    prefix: list[str],
    out: list[str],
    template: dict[str, str],
    *,
    env: bool = True,
) -> None:
    docs = {**_docstring_attributes(model), **_attribute_docs(model)}
    for name, info in model.model_fields.items():
        annotation = info.annotation
        nested = _nested_model(annotation)
        key = ".".join([*prefix, name])
        variable = "FAIRQUE_" + "__".join(p.upper() for p in [*prefix, name]) if env else ""
        if nested is not None:
            _config_rows(nested, [*prefix, name], out, template, env=env)
            continue
        description = info.description or docs.get(name) or template.get(key, "")
        out.append(
            f"| {_code(key)} | {_code(variable) if variable else ''} "
            f"| {_escape(_type_name(annotation))} "
            f"| {_escape(_default(info))} | {_rich(description)} |"
        )
        args = typing.get_args(annotation)
        item = _nested_model(args[0]) if typing.get_origin(annotation) is list and args else None
        if item is not None:
            # the items of a list of mappings: set through the list's variable, as JSON
            _config_rows(item, [*prefix, f"{name}[]"], out, template, env=False)


def config_markdown(template: Path) -> str:
    """Markdown for every configuration key of the settings model.

    A key's meaning comes from its field's description, its ``#:`` comment, its
    model's ``Attributes:`` docstring section, else the comment beside it in the
    commented YAML template (``config/worker.yaml``).
    """
    from fairque.config import SHORT_VARIABLES, Settings

    lines = [
        "<!-- generated from fairque.config.Settings at build time; do not edit -->",
        "",
        "| key | environment variable | type | default | meaning |",
        "| --- | --- | --- | --- | --- |",
    ]
    rows: list[str] = []
    _config_rows(Settings, [], rows, _template_comments(template))
    lines += rows
    lines += ["", "The sections:", ""]
    for name, info in Settings.model_fields.items():
        section = _nested_model(info.annotation)
        if section is not None and section.__doc__:
            doc = inspect.cleandoc(section.__doc__).split("Attributes:")[0].strip()
            lines.append(f"- {_code(name + ':')}: {_rich(doc)}")
    lines += ["", "Short variables:", ""]
    for short, long in SHORT_VARIABLES.items():
        lines.append(f"- {_code(short)}: the same as {_code(long)}")
    lines.append("")
    return "\n".join(lines)


# ------------------------------------------------------------------------- HTTP API


def _schema_type(schema: dict[str, Any]) -> str:
    """A short type of a JSON schema: ``LeaseIn``, ``integer 1..100``, ``string | null``."""
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " | ".join(_schema_type(s) for s in schema[key])
    kind = schema.get("type", "any")
    if isinstance(kind, list):
        kind = " | ".join(kind)
    if kind == "array":
        return f"array of {_schema_type(schema.get('items', {}))}"
    limits = []
    if "enum" in schema:
        return "one of " + ", ".join(json.dumps(v) for v in schema["enum"])
    if "minimum" in schema or "maximum" in schema:
        limits.append(f"{schema.get('minimum', '')}..{schema.get('maximum', '')}")
    if "maxLength" in schema:
        limits.append(f"{schema.get('minLength', 0)}..{schema['maxLength']} chars")
    if "format" in schema:
        limits.append(schema["format"])
    return " ".join([kind, *limits])


def _fields_table(schema: dict[str, Any], components: dict[str, Any]) -> list[str]:
    """Rows of one body's fields (the schema, or the one it refers to)."""
    if "$ref" in schema:
        schema = components.get(schema["$ref"].rsplit("/", 1)[-1], {})
    members = schema.get("anyOf") or schema.get("oneOf")
    if members and not schema.get("properties"):
        lines: list[str] = []
        for member in members:
            name = _schema_type(member)
            lines += ["", f"One of the shapes: {_code(name)}", ""]
            lines += _fields_table(member, components)
        return lines
    props = schema.get("properties", {})
    if not props:
        return [f"{_escape(_schema_type(schema))}"]
    required = set(schema.get("required", []))
    lines = ["| field | type | required | default |", "| --- | --- | --- | --- |"]
    for name, prop in props.items():
        default = json.dumps(prop["default"]) if "default" in prop else ""
        lines.append(
            f"| {_code(name)} | {_escape(_schema_type(prop))} | "
            f"{'yes' if name in required else ''} | {_escape(default)} |"
        )
    return lines


#: the head of every queue's endpoint, left out of the summary table so that it fits a
#: page's width (the table was clipped with whole paths)
QUEUE_PREFIX = "/v1/queues/{queue}"


def http_markdown(spec_path: Path) -> str:
    """Markdown for every endpoint of an OpenAPI document: a summary table, then each
    endpoint's parameters, body fields and answers, then the problem types."""
    spec = json.loads(spec_path.read_text())
    info = spec.get("info", {})
    components = spec.get("components", {}).get("schemas", {})
    lines = [
        f"<!-- generated from {spec_path.name} at build time; do not edit -->",
        "",
        f"{_escape(info.get('title', 'API'))}, version {_escape(str(info.get('version', '')))}.",
        "",
        f"In the table, a path that starts with `…` starts with {_code(QUEUE_PREFIX)}: the "
        "full paths head each endpoint's section below.",
        "",
        "| method | path | operation | roles | responses |",
        "| --- | --- | --- | --- | --- |",
    ]
    detail: list[str] = []
    used: set[str] = set()
    for path, item in spec.get("paths", {}).items():
        for method, op in item.items():
            if method not in {"get", "post", "put", "patch", "delete"}:
                continue
            description = op.get("description", "") or ""
            roles = ""
            match = re.search(r"Roles?: ([^.\n]+)", description)
            if match:
                roles = match.group(1)
            if op.get("security") == []:
                roles = "none needed"
            codes = ", ".join(sorted(op.get("responses", {})))
            name = op.get("summary") or op.get("operationId", "")
            short = "…" + path.removeprefix(QUEUE_PREFIX) if path.startswith(QUEUE_PREFIX) else path
            lines.append(
                f"| {method.upper()} | {_code(short)} | {_escape(name)} | {_escape(roles)} "
                f"| {_escape(codes)} |"
            )
            detail += ["", f"### {method.upper()} {_code(path)}", "", _escape(name) + "."]
            params = op.get("parameters", [])
            if params:
                detail += ["", "| parameter | in | type | required | meaning |",
                           "| --- | --- | --- | --- | --- |"]  # fmt: skip
                for p in params:
                    detail.append(
                        f"| {_code(p['name'])} | {p['in']} | "
                        f"{_escape(_schema_type(p.get('schema', {})))} | "
                        f"{'yes' if p.get('required') else ''} | "
                        f"{_escape(p.get('description', ''))} |"
                    )
            body = op.get("requestBody", {}).get("content", {})
            if body:
                schema = next(iter(body.values()))["schema"]
                detail += ["", f"Body ({_code(_schema_type(schema))}):", ""]
                detail += _fields_table(schema, components)
            answers = []
            for code, answer in sorted(op.get("responses", {}).items()):
                content = answer.get("content", {})
                kind = _schema_type(next(iter(content.values()))["schema"]) if content else ""
                if kind and kind != "Problem" and kind not in used:
                    used.add(kind)
                answers.append(f"{code} {_code(kind)}" if kind else code)
            detail += ["", "Answers: " + ", ".join(answers) + "."]
    lines += ["", "## Endpoints", *detail, "", "## Answer bodies", ""]
    for kind in sorted(used):
        if kind in components and " " not in kind:
            lines += ["", f"### {_code(kind)}", ""]
            lines += _fields_table({"$ref": f"#/components/schemas/{kind}"}, components)
    problems = spec.get("x-problem-types", {})
    if problems:
        lines += ["", "## Problem types", "",
                  "Every error is a problem object (`application/problem+json`, or MessagePack "
                  "when `Accept` asks): `type`, `title`, `status`, `detail`, and `errors` "
                  "(field, message) for a validation problem, `task_state` where a task's "
                  "state matters.", "",
                  "| type | status | meaning |", "| --- | --- | --- |"]  # fmt: skip
        for urn, meta in problems.items():
            lines.append(f"| {_code(urn)} | {meta['status']} | {_escape(meta['meaning'])} |")
    lines.append("")
    return "\n".join(lines)


# ------------------------------------------------------------------ keys and scripts


def keys_markdown() -> str:
    """Markdown for every key of a queue, from ``fairque.core.keys.QueueKeys``."""
    from fairque.core.keys import QueueKeys

    keys = QueueKeys("<queue>")
    lines = [
        "<!-- generated from fairque.core.keys.QueueKeys at build time; do not edit -->",
        "",
        "| attribute | key | holds |",
        "| --- | --- | --- |",
    ]
    for name, member in vars(QueueKeys).items():
        if name.startswith("_") or name == "prefix":
            continue
        doc = inspect.getdoc(member) or ""
        if isinstance(member, property):
            key = getattr(keys, name)
        elif inspect.isfunction(member):
            params = list(inspect.signature(member).parameters)[1:]
            if len(params) != 1:
                continue
            key = member(keys, f"<{params[0]}>")
            name = f"{name}({params[0]})"
        else:
            continue
        lines.append(f"| {_code(name)} | {_code(key)} | {_rich(doc.split(chr(10))[0])} |")
    lines.append("")
    return "\n".join(lines)


def scripts_markdown(lua_dir: Path) -> str:
    """Every Lua script's contract header (purpose, ARGV, reply) and the keys its
    binding declares (each described in the key table above)."""
    from fairque.core.scripts import declared_keys

    lines = ["<!-- generated from src/fairque/lua/*.lua at build time; do not edit -->", ""]
    for path in sorted(lua_dir.glob("*.lua")):
        text = path.read_text()
        match = re.search(r"--\[\[(.*?)\]\]", text, re.S)
        header = match[1].strip("\n") if match else "(no header)"
        keys = ", ".join(f"`{k}`" for k in declared_keys(text))
        lines += [f"### `{path.name}`", "", f"Keys: {keys}", "", "```text", header, "```", ""]
    return "\n".join(lines)


def generate(docs_dir: Path) -> None:
    """Write every generated page under ``docs_dir / "_generated"``."""
    out = docs_dir / "_generated"
    out.mkdir(exist_ok=True)
    pages = {
        "cli.md": cli_markdown(),
        "config.md": config_markdown(docs_dir.parent / "config" / "worker.yaml"),
        "http.md": http_markdown(docs_dir / "openapi.json"),
        "worker-http.md": http_markdown(docs_dir / "worker-openapi.json"),
        "keys.md": keys_markdown(),
        "scripts.md": scripts_markdown(docs_dir.parent / "src" / "fairque" / "core" / "lua"),
    }
    for name, text in pages.items():
        target = out / name
        if not target.exists() or target.read_text() != text:
            target.write_text(text)
