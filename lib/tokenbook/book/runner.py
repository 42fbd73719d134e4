"""The runner: discover chapters, validate parameters, execute a chapter into a run folder.

A chapter is ``<root>/notebooks/<name>.py`` (jupytext percent format) with one cell tagged
``parameters`` that holds literal defaults (``seed = 0``, ``scale = "tiny"``). Its parameter
files are ``<root>/params/<name>/*.yaml``.

:func:`run_chapter` executes a chapter with jupytext → papermill (kernel ``python3``, working
directory = ``root``) into a fresh run folder ``<runs>/<chapter>/<RUN_ID>/`` holding

* ``<chapter>.ipynb`` — the executed notebook (partial if the run failed),
* ``claims.json`` — written by the chapter's closing :func:`tokenbook.claims.report`,
* ``figures/`` — written by :func:`tokenbook.plotting.savefig`,
* ``papermill.log`` — only after a failure: papermill's last 200 output lines (the kernel's
  own error included),
* ``run.json`` — chapter, run_id, parameters, overrides, seed, git_commit, versions, wall_s,
  peak_rss_mb (peak resident memory of the executing process tree, MiB), status
  (``running`` while it runs, then ``ok`` or ``failed``; ``died`` when the runner process was
  killed), source_hash (notebook + library), pid and host of the runner,
  kernel_start_attempts, …

A kernel that dies before it is ready (no cell has run; e.g. a port jupyter_client chose for it
was taken by another process before the kernel bound it) is started again, up to
:data:`KERNEL_START_ATTEMPTS` times; a failure inside a cell is never retried.

The folder appears with its ``run.json`` already in it (it is staged under a temporary name and
renamed). papermill runs under :mod:`tokenbook.book.supervise`, which stops the notebook's whole
process tree (kernel, training subprocesses) when the run ends, is interrupted (Ctrl-C, SIGTERM)
or its runner dies (SIGKILL), and then marks the run ``died``. :func:`list_runs` also reports a
``running`` run whose runner process is gone as ``died``.

``RUN_ID`` (``20261122T004501.123456Z-1a2b``) sorts by start time and is unique. A run never
touches another run's folder, so a failed or killed run leaves earlier runs intact.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import importlib
import io
import itertools
import json
import math
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import tokenize
import types as pytypes
import typing
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

from tokenbook.book.paramtypes import REQUIREMENTS
from tokenbook.cache import tmp_tag, clean_stale, write_json_atomic
from tokenbook.parallel import worker_environ
from tokenbook.provenance import git_commit, versions

RUNS_DIRNAME = Path("_build") / "runs"
ROOT_ENV = "TOKENBOOK_ROOT"
RUN_JSON_KEYS = ("chapter", "run_id", "parameters", "overrides", "seed", "git_commit", "versions",
                 "wall_s", "peak_rss_mb", "status", "source_hash")


class RunnerError(Exception):
    """A problem with the user's request (unknown chapter, bad parameter): exit code 2."""


class ParameterError(RunnerError):
    """An unknown parameter or a value of the wrong type."""


# --------------------------------------------------------------------------------------------
# Discovery
# --------------------------------------------------------------------------------------------
def find_root(start: str | Path | None = None) -> Path:
    """The book's root: ``$TOKENBOOK_ROOT``, else the nearest folder at or above ``start``
    (default: cwd) holding ``notebooks/`` and ``pyproject.toml``, else the checkout tokenbook
    is installed from."""
    if os.environ.get(ROOT_ENV):
        return Path(os.environ[ROOT_ENV]).resolve()
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "notebooks").is_dir() and (folder / "pyproject.toml").exists():
            return folder
    return Path(__file__).resolve().parents[2]


@dataclass
class ParamSpec:
    """What a parameter accepts, from its annotation (``name: int | None = 0``, or a named type
    of :mod:`tokenbook.book.paramtypes` such as ``Count``) or its default.

    ``types`` are names among ``int float str bool list dict none`` (empty: anything);
    ``choices`` come from ``Literal[...]``; ``bounds`` from ``Annotated[int, ">= 1"]``,
    ``Annotated[float, "0..1"]`` or ``Annotated[float, "(0, 1)"]``; ``items`` is the spec of a
    list's elements (``list[str]``) and ``min_len`` its least length (``"len >= 1"``)."""

    types: tuple[str, ...] = ()
    choices: tuple[Any, ...] | None = None
    bounds: tuple[str, ...] = ()
    items: "ParamSpec | None" = None
    min_len: int = 0

    def describe(self) -> str:
        """The accepted values in words: ``'tiny' | 'paper'``, ``int >= 1``,
        ``list[str] (at least 1)``."""
        if self.choices is not None:
            return " | ".join(repr(c) for c in self.choices)
        names = []
        for t in self.types:
            if t == "list" and self.items is not None:
                t = f"list[{self.items.describe()}]"
            names.append("None" if t == "none" else t)
        text = " | ".join(names) or "any"
        if self.bounds:
            text += " " + ", ".join(self.bounds)
        if self.min_len:
            text += f" (at least {self.min_len} value{'s' if self.min_len > 1 else ''})"
        return text

    def check_bounds(self, value: Any) -> str | None:
        """The first bound ``value`` violates (or ``"a finite number"``), or None."""
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return None
        if not math.isfinite(value):
            return "a finite number"
        for bound in self.bounds:
            m = _BOUND.match(bound)
            if m is None:
                continue
            if m["lo"] is not None:
                if not float(m["lo"]) <= value <= float(m["hi"]):
                    return f"in [{m['lo']}, {m['hi']}]"
            elif m["ilo"] is not None:
                lo, hi = float(m["ilo"]), float(m["ihi"])
                above = value >= lo if m["left"] == "[" else value > lo
                below = value <= hi if m["right"] == "]" else value < hi
                if not (above and below):
                    return f"in {m['left']}{m['ilo']}, {m['ihi']}{m['right']}"
            elif not {">=": value >= float(m["x"]), "<=": value <= float(m["x"]),
                      ">": value > float(m["x"]), "<": value < float(m["x"])}[m["op"]]:
                return f"{m['op']} {m['x']}"
        return None


_NUM = r"-?(?:\d+\.?\d*|\.\d+)(?:[eE]-?\d+)?"
_BOUND = re.compile(rf"^\s*(?:(?P<op>>=|<=|>|<)\s*(?P<x>{_NUM})|(?P<lo>{_NUM})\s*\.\.\s*"
                    rf"(?P<hi>{_NUM})|(?P<left>[(\[])\s*(?P<ilo>{_NUM})\s*,\s*(?P<ihi>{_NUM})"
                    rf"\s*(?P<right>[)\]]))\s*$")
_LEN_BOUND = re.compile(r"^\s*len\s*>=\s*(?P<n>\d+)\s*$")
#: modules a parameters cell may import named types from (read without running the notebook)
_TYPE_MODULES = ("typing", "tokenbook.book.paramtypes")


_TYPE_NAMES = {"int": "int", "float": "float", "str": "str", "bool": "bool", "list": "list",
               "List": "list", "tuple": "list", "Tuple": "list", "Sequence": "list",
               "dict": "dict", "Dict": "dict", "Mapping": "dict", "Path": "str", "None": "none",
               "NoneType": "none"}


def _name_of(node: ast.AST) -> str | None:
    return node.id if isinstance(node, ast.Name) else node.attr \
        if isinstance(node, ast.Attribute) else None


def _with_constraints(inner: ParamSpec, extras: Iterable[Any]) -> ParamSpec:
    """``inner`` with the bound strings of an ``Annotated[...]`` added."""
    bounds, min_len = list(inner.bounds), inner.min_len
    for extra in extras:
        if not isinstance(extra, str):
            continue
        m = _LEN_BOUND.match(extra)
        if m:
            min_len = max(min_len, int(m["n"]))
        elif _BOUND.match(extra):
            bounds.append(extra.strip())
    return ParamSpec(inner.types, inner.choices, tuple(bounds), inner.items, min_len)


def _spec_from_type(tp: Any) -> ParamSpec | None:
    """A :class:`ParamSpec` from a runtime type (``int``, ``list[str]``,
    ``Annotated[int, ">= 1"]``, ``Literal["a", "b"]``, ``Optional[...]``); None if unknown."""

    if tp is None or tp is type(None):
        return ParamSpec(("none",))
    if tp is typing.Any or tp is object:
        return ParamSpec()
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Literal:
        kinds = tuple(dict.fromkeys("none" if v is None else _type_name(v) for v in args))
        return ParamSpec(kinds, tuple(args))
    if origin is typing.Annotated:
        return _with_constraints(_spec_from_type(args[0]) or ParamSpec(), args[1:])
    if origin is typing.Union or origin is pytypes.UnionType:
        return _union([_spec_from_type(a) for a in args])
    if origin in (list, tuple) or (origin is not None and getattr(origin, "__name__", "")
                                   in ("Sequence",)):
        return ParamSpec(("list",), items=_spec_from_type(args[0]) if args else None)
    if origin is dict or (origin is not None and getattr(origin, "__name__", "") == "Mapping"):
        return ParamSpec(("dict",))
    name = getattr(tp, "__name__", None)
    return ParamSpec((_TYPE_NAMES[name],)) if name in _TYPE_NAMES else None


def _spec_from_annotation(node: ast.AST | None, names: Mapping[str, Any] | None = None
                          ) -> ParamSpec | None:
    """A :class:`ParamSpec` from a type annotation; None when it cannot be read (then the
    default's type is used); an empty spec for ``Any`` or unions of unknown types. ``names``
    maps names imported in the parameters cell (e.g. ``Count`` from
    :mod:`tokenbook.book.paramtypes`) to their runtime types."""
    if node is None:
        return None
    names = names or {}
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # "int | None"
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return None
    if isinstance(node, ast.Constant) and node.value is None:
        return ParamSpec(("none",))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        parts = [_spec_from_annotation(node.left, names),
                 _spec_from_annotation(node.right, names)]
        return _union(parts)
    name = _name_of(node)
    if name is not None:
        if name in names and names[name] is not None:
            return _spec_from_type(names[name])
        if name in ("Any", "object"):
            return ParamSpec()
        return ParamSpec((_TYPE_NAMES[name],)) if name in _TYPE_NAMES else None
    if isinstance(node, ast.Subscript):
        base = _name_of(node.value)
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if base == "Literal":
            try:
                values = tuple(ast.literal_eval(a) for a in args)
            except ValueError:
                return None
            types = tuple(dict.fromkeys("none" if v is None else _type_name(v) for v in values))
            return ParamSpec(types, values)
        if base == "Annotated" and args:
            inner = _spec_from_annotation(args[0], names) or ParamSpec()
            return _with_constraints(inner, [a.value for a in args[1:]
                                             if isinstance(a, ast.Constant)])
        if base in ("Optional", "Union"):
            parts = [_spec_from_annotation(a, names) for a in args]
            if base == "Optional":
                parts.append(ParamSpec(("none",)))
            return _union(parts)
        if base in _TYPE_NAMES and _TYPE_NAMES[base] == "list":
            return ParamSpec(("list",), items=_spec_from_annotation(args[0], names))
        if base in _TYPE_NAMES:
            return ParamSpec((_TYPE_NAMES[base],))
    return None


def _union(parts: list[ParamSpec | None]) -> ParamSpec:
    if any(p is None or not p.types for p in parts):
        return ParamSpec()  # a part we cannot check: accept anything
    types = tuple(dict.fromkeys(t for p in parts for t in p.types))  # type: ignore[union-attr]
    bounds = tuple(b for p in parts for b in p.bounds)  # type: ignore[union-attr]
    lists = [p for p in parts if "list" in p.types]  # type: ignore[union-attr]
    items = lists[0].items if len(lists) == 1 else None
    min_len = lists[0].min_len if len(lists) == 1 else 0
    choices = None
    if any(p.choices is not None for p in parts):  # type: ignore[union-attr]
        if all(p.choices is not None or p.types == ("none",) for p in parts):  # type: ignore
            choices = tuple(c for p in parts for c in (p.choices  # type: ignore[union-attr]
                                                       if p.choices is not None else (None,)))
        else:
            return ParamSpec(types, None, bounds, items, min_len)
    return ParamSpec(types, choices, bounds, items, min_len)


def _imported_types(tree: ast.Module) -> dict[str, Any]:
    """Names the parameters cell imports from :data:`_TYPE_MODULES` → their runtime objects."""
    found: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module in _TYPE_MODULES:
            module = importlib.import_module(node.module)
            for alias in node.names:
                found[alias.asname or alias.name] = getattr(module, alias.name, None)
    return found


def _spec_from_default(default: Any) -> ParamSpec:
    return ParamSpec() if default is None else ParamSpec((_type_name(default),))


@dataclass
class Chapter:
    """A chapter notebook and its parameters (name → literal default), with each parameter's
    annotation, help (its comment) and cost note (``cost: ...`` at the end of the comment)."""

    name: str
    path: Path
    parameters: dict[str, Any]
    param_files: list[Path] = field(default_factory=list)
    error: str | None = None  # why the notebook's parameters could not be read
    annotations: dict[str, str] = field(default_factory=dict)
    help: dict[str, str] = field(default_factory=dict)
    cost: dict[str, str] = field(default_factory=dict)
    specs: dict[str, ParamSpec] = field(default_factory=dict)

    def types(self) -> dict[str, str]:
        return {k: self.annotations.get(k) or _type_name(v) for k, v in self.parameters.items()}

    def spec(self, name: str) -> ParamSpec:
        return self.specs.get(name) or _spec_from_default(self.parameters[name])


def _type_name(default: Any) -> str:
    return "any" if default is None else "list" if isinstance(default, tuple) \
        else type(default).__name__


_COST_SPLIT = re.compile(r"\s*[\[(;,—–-]?\s*\bcosts?:\s*", flags=re.IGNORECASE)
_COST_WORDS = re.compile(r"\b(re)?train|\brescor|\bscor(es|ing)\b|~\s*\d|\d\s*(s|min|h|GB|GiB)\b|"
                         r"\bminutes?\b|\bhours?\b|\bdownload", flags=re.IGNORECASE)


def _split_help(comment: str) -> tuple[str, str]:
    """A parameter's comment → (help, cost note). The cost note is what follows ``cost:``, else
    the last parenthesis if it speaks of training, scoring, time or downloads:
    ``"first seed (retrains every model)"`` → ``("first seed", "retrains every model")``."""
    text = comment.lstrip("#").strip()
    parts = _COST_SPLIT.split(text, maxsplit=1)
    if len(parts) == 2:
        return parts[0].rstrip(" —–-;,"), parts[1].rstrip(")] ").strip()
    m = re.search(r"\s*\(([^()]*)\)\s*$", text)
    if m and _COST_WORDS.search(m.group(1)):
        return text[:m.start()].rstrip(" ;,"), m.group(1).strip()
    return text, ""


def _comments(source: str) -> dict[int, tuple[str, bool]]:
    """Line (1-based) → (comment text, whether the line holds only the comment)."""

    out: dict[int, tuple[str, bool]] = {}
    lines = source.splitlines()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                row, col = tok.start
                out[row] = (tok.string, not lines[row - 1][:col].strip())
    except (tokenize.TokenError, SyntaxError):
        pass
    return out


def read_parameter_cell(path: str | Path) -> Chapter:
    """The cell tagged ``parameters`` of a jupytext ``.py`` notebook, read without running it:
    literal defaults, annotations (``name: int = 3``) and each parameter's help from its
    comment (trailing ``# help``, or the comment lines just above it); ``cost: ...`` at the end
    of a comment is the parameter's cost note. Raises :class:`RunnerError` if there is no such
    cell, or a default is not a literal (papermill could not override it faithfully)."""
    import jupytext

    path = Path(path)
    nb = jupytext.read(path, fmt="py:percent")
    cells = [c for c in nb.cells
             if c.cell_type == "code" and "parameters" in c.metadata.get("tags", [])]
    if not cells:
        raise RunnerError(f"{path}: no cell tagged 'parameters' "
                          f"(add one: '# %% tags=[\"parameters\"]' holding the defaults)")
    source = cells[0].source
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise RunnerError(f"{path}: the parameters cell is not valid Python (line {exc.lineno} "
                          f"of the cell: {exc.msg})") from None
    comments = _comments(source)
    try:
        imported = _imported_types(tree)
    except (ImportError, AttributeError) as exc:
        raise RunnerError(f"{path}: the parameters cell imports a type that cannot be read "
                          f"({exc})") from None
    ch = Chapter(path.stem, path, {})
    previous_end = 0
    for node in tree.body:
        annotation = None
        if isinstance(node, (ast.Import, ast.ImportFrom)):  # e.g. typing.Literal for annotations
            previous_end = node.end_lineno or node.lineno
            continue
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name):
            name, value = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                and node.value is not None:
            name, value, annotation = node.target.id, node.value, node.annotation
        else:
            raise RunnerError(f"{path}: the parameters cell may hold only 'name = literal' "
                              f"(or 'name: type = literal') lines and imports; found "
                              f"{ast.unparse(node)!r}")
        try:
            ch.parameters[name] = ast.literal_eval(value)
        except ValueError:
            raise RunnerError(f"{path}: parameter {name!r} must have a literal default, got "
                              f"{ast.unparse(value)!r}") from None
        if annotation is not None:
            ch.annotations[name] = ast.unparse(annotation)
            spec = _spec_from_annotation(annotation, imported)
            if spec is not None:
                ch.specs[name] = spec
        end = node.end_lineno or node.lineno
        trailing = comments.get(end)
        if trailing and not trailing[1]:
            text = trailing[0]
        else:  # full-line comments just above (not belonging to the previous statement)
            above, line = [], node.lineno - 1
            while line > previous_end and line in comments and comments[line][1]:
                above.insert(0, comments[line][0].lstrip("#").strip())
                line -= 1
            text = " ".join(above)
        ch.help[name], cost = _split_help(text)
        if cost:
            ch.cost[name] = cost
        previous_end = end
    return ch


def read_parameters(path: str | Path) -> dict[str, Any]:
    """The literal defaults of the cell tagged ``parameters`` in a jupytext ``.py`` notebook
    (see :func:`read_parameter_cell`)."""
    return read_parameter_cell(path).parameters


def discover(root: str | Path | None = None) -> dict[str, Chapter]:
    """Every chapter under ``<root>/notebooks`` (files starting with ``_`` are skipped)."""
    root = Path(root) if root is not None else find_root()
    chapters = {}
    for path in sorted((root / "notebooks").glob("*.py")):
        if path.name.startswith("_"):
            continue
        name = path.stem
        files = sorted((root / "params" / name).glob("*.yaml")) \
            if (root / "params" / name).is_dir() else []
        try:
            chapters[name] = read_parameter_cell(path)
            chapters[name].param_files = files
        except Exception as exc:  # one broken notebook must not block the others
            chapters[name] = Chapter(name, path, {}, files, error=str(exc))
    return chapters


def get_chapter(name: str, root: str | Path | None = None) -> Chapter:
    chapters = discover(root)
    if name not in chapters:
        hint = difflib.get_close_matches(name, list(chapters), n=1)
        raise RunnerError(f"unknown chapter {name!r}"
                          + (f" (did you mean {hint[0]!r}?)" if hint else "")
                          + f"; chapters: {', '.join(chapters) or '(none found)'}")
    if chapters[name].error:
        raise RunnerError(chapters[name].error)
    return chapters[name]


# --------------------------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------------------------
def _yaml12_loader() -> type:
    """A safe YAML loader with YAML 1.2 core-schema scalars: only ``true``/``false`` are
    booleans (``no``, ``on``, ``yes``, ``y`` stay strings: ``no`` is Norwegian), integers are
    decimal (``017`` is 17; ``0o17`` and ``0x1f`` as written), ``1e-3`` is a float, ``1:30``
    a string."""
    class Yaml12Loader(yaml.SafeLoader):
        pass

    replaced = {"tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"}
    Yaml12Loader.yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag not in replaced]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
    Yaml12Loader.add_implicit_resolver(
        "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
        list("tTfF"))
    Yaml12Loader.add_implicit_resolver(
        "tag:yaml.org,2002:int", re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"),
        list("-+0123456789"))
    Yaml12Loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                   r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"), list("-+0123456789."))

    def construct_int(loader, node):
        text = loader.construct_scalar(node)
        if text.startswith("0o"):
            return int(text[2:], 8)
        if text.startswith("0x"):
            return int(text[2:], 16)
        return int(text, 10)

    Yaml12Loader.add_constructor("tag:yaml.org,2002:int", construct_int)
    return Yaml12Loader


_YAML12: type | None = None


def yaml12_loader() -> type:
    """The YAML 1.2 loader class used for ``-p`` values and ``-f`` files (built once)."""
    global _YAML12
    if _YAML12 is None:
        _YAML12 = _yaml12_loader()
    return _YAML12


def parse_value(text: str) -> Any:
    """A command-line value parsed as YAML 1.2 (``3`` → int, ``0.5`` and ``1e-3`` → float,
    ``true`` → bool, ``[1, 2]`` → list, ``""`` or ``null`` → None, anything else → str;
    ``no``/``on``/``yes`` stay strings)."""
    try:
        return yaml.load(text, Loader=yaml12_loader())  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError:
        return text


def _yaml_problem(path: Path, exc: Exception, text: str) -> str:
    """One line for a YAML syntax error: ``FILE:LINE: problem; what to do``."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if mark is None:
        return f"{path}: not valid YAML ({problem})"
    line_text = text.splitlines()[mark.line] if mark.line < len(text.splitlines()) else ""
    hint = "write one 'name: value' per line"
    if "\t" in line_text or "\\t" in problem:
        hint = "YAML cannot indent with tabs: use spaces (or none: 'name: value')"
    return f"{path}:{mark.line + 1}: not valid YAML ({problem}); {hint}"


def load_param_file(path: str | Path) -> dict[str, Any]:
    """A YAML mapping of parameter values. Any problem raises :class:`RunnerError` naming the
    file (and the line, for syntax errors)."""
    values, _ = _load_param_file(path)
    return values


def _load_param_file(path: str | Path) -> tuple[dict[str, Any], dict[str, int]]:
    """The mapping and the line (1-based) of each name."""
    path = Path(path)
    if not path.exists():
        raise RunnerError(f"parameter file {path} does not exist (give a YAML file such as "
                          f"params/CHAPTER/tiny.yaml)")
    if path.is_dir():
        raise RunnerError(f"parameter file {path} is a folder; give one of the YAML files in it"
                          + (f" ({', '.join(p.name for p in sorted(path.glob('*.yaml'))[:5])})"
                             if list(path.glob("*.yaml")) else ""))
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise RunnerError(f"parameter file {path} cannot be read ({exc.strerror})") from None
    if b"\x00" in raw:
        raise RunnerError(f"parameter file {path} is binary, not YAML text; give a YAML file "
                          f"of 'name: value' lines")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise RunnerError(f"{path}:{line}: not UTF-8 text (byte {exc.start}); save the file "
                          f"as UTF-8") from None
    loader = None
    try:
        loader = yaml12_loader()(text)
        node = loader.get_single_node()
        if node is None:
            return {}, {}
        if not isinstance(node, yaml.MappingNode):
            data = loader.construct_document(node)
            raise RunnerError(f"parameter file {path} must be a mapping of 'name: value' lines, "
                              f"got a {type(data).__name__}")
        values: dict[str, Any] = {}
        lines: dict[str, int] = {}
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode):
                raise RunnerError(f"{path}:{line}: a parameter name must be a plain word; "
                                  f"write 'name: value'")
            key = key_node.value  # as written: a parameter called 'null' or 'on' stays a name
            if key in lines:
                raise RunnerError(f"{path}:{line}: parameter {key!r} is given twice (first on "
                                  f"line {lines[key]}); keep one")
            lines[key] = line
            values[key] = loader.construct_object(value_node, deep=True)
    except yaml.YAMLError as exc:
        raise RunnerError(_yaml_problem(path, exc, text)) from None
    finally:
        if loader is not None:
            loader.dispose()
    return values, lines


_TO = {"int": int, "float": float, "str": str, "bool": bool, "list": list, "dict": dict}


def _convert(value: Any, type_name: str) -> tuple[bool, Any]:
    """(ok, converted) for ``value`` as ``type_name``."""
    if type_name == "none":
        return value is None, None
    if type_name == "bool":
        return isinstance(value, bool), value
    if type_name == "int":
        return isinstance(value, int) and not isinstance(value, bool), value
    if type_name == "float":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return True, float(value)
        if isinstance(value, str):  # YAML reads "1e-3" as a string
            try:
                return True, float(value)
            except ValueError:
                return False, value
        return False, value
    if type_name == "str":
        return isinstance(value, str), value
    if type_name == "list":
        return isinstance(value, (list, tuple)), list(value) if isinstance(value, (list, tuple)) \
            else value
    if type_name == "dict":
        return isinstance(value, dict), value
    return False, value


def _check_value(value: Any, spec: ParamSpec) -> Any:
    """``value`` checked against ``spec`` (not None); returns it converted. Raises
    :class:`_Rejected` with what was expected."""
    if spec.choices is not None:
        if value in spec.choices and not (isinstance(value, bool)
                                          and not any(isinstance(c, bool) for c in spec.choices)):
            return value
        hint = difflib.get_close_matches(str(value), [str(c) for c in spec.choices], n=1)
        raise _Rejected(f"must be one of {spec.describe()}, got {value!r}"
                        + (f" (did you mean {hint[0]!r}?)" if hint else ""))
    if not spec.types:
        return value
    for type_name in spec.types:
        ok, converted = _convert(value, type_name)
        if not ok:
            continue
        broken = spec.check_bounds(converted)
        if broken:
            raise _Rejected(f"must be {broken}, got {value!r}")
        if type_name == "list":
            if len(converted) < spec.min_len:
                raise _Rejected(f"must hold at least {spec.min_len} value(s), got {value!r}")
            if spec.items is not None:
                out = []
                for i, item in enumerate(converted):
                    try:
                        out.append(_check_value(item, spec.items))
                    except _Rejected as exc:
                        raise _Rejected(f"element {i}: {exc}") from None
                converted = out
        return converted
    if value is None:
        raise _Rejected(f"expects {spec.describe()}, got an empty value")
    raise _Rejected(f"expects {spec.describe()}, got {value!r} ({type(value).__name__})")


class _Rejected(Exception):
    """Why a value does not fit a spec (without the parameter's name)."""


def _coerce(name: str, value: Any, default: Any, spec: ParamSpec | None = None) -> Any:
    """``value`` checked against the parameter's annotation (``spec``) or the type of
    ``default``; returns the (converted) value. An empty value (None) is accepted only when the
    default is None or the annotation allows None. Every float must be finite."""
    spec = spec or _spec_from_default(default)
    if value is None:
        if "none" in spec.types or (not spec.types and default is None) \
                or (default is None and spec.choices is None):
            return None
        raise ParameterError(f"parameter {name!r} needs a value ({spec.describe()}, default "
                             f"{default!r}), got an empty one; give a value or leave the "
                             f"parameter out")
    try:
        return _check_value(value, spec)
    except _Rejected as exc:
        raise ParameterError(f"parameter {name!r} {exc} (default {default!r})") from None


def validate(chapter: Chapter, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Check ``overrides`` against the chapter's parameters; return them type-converted.

    Raises :class:`ParameterError` naming every valid parameter (and the closest match) for an
    unknown name, the expected type (or allowed values) for a value of the wrong type, and an
    empty value where the parameter needs one.
    """
    valid = chapter.parameters
    listing = ", ".join(f"{k} ({chapter.types()[k]}, default {v!r})" for k, v in valid.items())
    checked: dict[str, Any] = {}
    for name, value in overrides.items():
        if name not in valid:
            hint = difflib.get_close_matches(str(name), list(valid), n=1)
            raise ParameterError(
                f"chapter {chapter.name!r} has no parameter {name!r}"
                + (f" (did you mean {hint[0]!r}?)" if hint else "")
                + f". Valid parameters: {listing or '(none)'}")
        checked[name] = _coerce(name, value, valid[name], chapter.specs.get(name))
    return checked


def collect_overrides(chapter: Chapter, files: Iterable[str | Path] = (),
                      pairs: Iterable[tuple[str, str]] = (), *, complete: bool = True
                      ) -> dict[str, Any]:
    """Parameter files (in order) then ``-p NAME VALUE`` pairs, validated. A bad value in a
    file is reported with the file and its line; a name given twice with ``-p`` is an error.
    With ``complete`` (a run's whole request) the data the parameters select must be given
    (:func:`check_requirements`)."""
    raw: dict[str, Any] = {}
    for f in files:
        values, lines = _load_param_file(f)
        for name, value in values.items():
            try:
                validate(chapter, {name: value})
            except ParameterError as exc:
                raise ParameterError(f"{f}:{lines.get(name, '?')}: {exc}") from None
        raw.update(values)
    given: dict[str, Any] = {}
    for name, text in pairs:
        if name in given:
            raise ParameterError(f"parameter {name!r} is given twice (-p {name} {given[name]} "
                                 f"and -p {name} {text}); keep one")
        given[name] = text
        raw[name] = parse_value(text) if isinstance(text, str) else text
    checked = validate(chapter, raw)
    if complete:
        check_requirements(chapter, {**chapter.parameters, **checked})
    return checked


def check_requirements(chapter: Chapter | str, parameters: Mapping[str, Any]) -> None:
    """Raise :class:`ParameterError` when the (full) ``parameters`` select a path whose data
    are not given (:data:`tokenbook.book.paramtypes.REQUIREMENTS`, e.g. memorisation at paper scale
    without ``corpus``), saying what to pass."""
    name = chapter if isinstance(chapter, str) else chapter.name
    for rule in REQUIREMENTS.get(name, ()):
        if all(parameters.get(k) == v for k, v in rule.when):
            if all(parameters.get(n) in (None, "", [], {}) for n in rule.needs):
                when = ", ".join(f"{k} {v}" for k, v in rule.when)
                needs = " or ".join(repr(n) for n in rule.needs)
                raise ParameterError(f"{name} with {when} needs {needs}; pass {rule.what}")


def check_kernel_parameters(chapter: str, namespace: dict[str, Any], *,
                            root: str | Path | None = None) -> dict[str, Any]:
    """Check the parameter values an executing notebook holds (``namespace``: its globals)
    with the runner's own checks, before any work; what plain papermill injected included.

    papermill's ``-p`` passes text (``-p seeds '[0, 1]'`` arrives as the string
    ``'[0, 1]'``): a string where the parameter takes no string is read as YAML 1.2 first.
    Names papermill injected that are not parameters of the chapter are rejected (the
    injected cell is found in the kernel's input history, ``In``). The converted values are
    written back into ``namespace``; the full parameters are returned. Raises
    :class:`ParameterError` (one line naming the parameter)."""
    root = Path(root) if root is not None else find_root()
    ch = read_parameter_cell(root / "notebooks" / f"{chapter}.py")
    injected = injected_names(namespace.get("In") or [])
    unknown = [n for n in injected if n not in ch.parameters]
    if unknown:
        validate(ch, {unknown[0]: namespace.get(unknown[0])})  # the runner's own message
    values: dict[str, Any] = {}
    for name in ch.parameters:
        if name not in namespace:
            continue
        value = namespace[name]
        spec = ch.spec(name)
        if isinstance(value, str) and "str" not in spec.types and not (
                spec.choices is not None and value in spec.choices):
            value = parse_value(value)
        values[name] = value
    checked = validate(ch, values)
    params = {**ch.parameters, **checked}
    check_requirements(ch, params)
    namespace.update(checked)
    return params


def injected_names(history: Iterable[str]) -> list[str]:
    """The names assigned in papermill's injected-parameters cell (it starts with the line
    ``# Parameters``), found in a kernel's input history; [] when there is none."""
    names: list[str] = []
    for source in history:
        if not isinstance(source, str) or not source.lstrip().startswith("# Parameters"):
            continue
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, ast.Assign):
                names += [t.id for t in node.targets if isinstance(t, ast.Name)]
    return list(dict.fromkeys(names))


# --------------------------------------------------------------------------------------------
# Source hash and run folders
# --------------------------------------------------------------------------------------------
def hashed_sources(chapter: Chapter) -> list[Path]:
    """The files a chapter's run depends on: its notebook, every library source file
    (``lib/tokenbook/**/*.py``, the science and the chapter packages included) and the CUDA
    kernels (``kernels/*``)."""
    package = Path(__file__).resolve().parents[1]          # lib/tokenbook
    files = [chapter.path]
    files += sorted(p for p in package.rglob("*.py") if "__pycache__" not in p.parts)
    kernels = package.parents[1] / "kernels"
    if kernels.is_dir():
        files += sorted(p for p in kernels.iterdir() if p.is_file())
    return files


def source_hash(chapter: Chapter) -> str:
    """sha256 of :func:`hashed_sources` (names and bytes): a run with the same hash and
    parameters is up to date."""
    h = hashlib.sha256()
    for p in hashed_sources(chapter):
        h.update(str(p.name).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:20]


def new_run_id() -> str:
    """A run id that sorts by start time (UTC, microseconds) and is unique."""
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ") + "-" + secrets.token_hex(2)


def runs_root(root: str | Path | None = None, out: str | Path | None = None) -> Path:
    if out is not None:
        return Path(out).resolve()
    return (Path(root) if root is not None else find_root()) / RUNS_DIRNAME


def _process_started(pid: int) -> float | None:
    """Start time (s since the epoch) of process ``pid``, None if there is none."""
    try:
        import psutil

        return psutil.Process(pid).create_time()
    except Exception:  # no such process (or no psutil: treat as unknown below)
        return None


def runner_alive(info: Mapping[str, Any]) -> bool | None:
    """Whether the process that owns a run (``pid``/``pid_started``/``host`` in its run.json)
    still runs: True/False, or None when that cannot be told (another host, older run.json)."""
    pid, host = info.get("pid"), info.get("host")
    if not isinstance(pid, int) or host != socket.gethostname():
        return None
    started = _process_started(pid)
    if started is None:
        return False
    recorded = info.get("pid_started")
    return recorded is None or abs(float(recorded) - started) < 1.0


def list_runs(chapter: str, runs: str | Path) -> list[dict]:
    """The ``run.json`` of every run of ``chapter`` under ``runs``, oldest first. A run still
    marked ``running`` whose runner process is gone is reported with status ``died``."""
    out = []
    folder = Path(runs) / chapter
    if not folder.is_dir():
        return out
    for run_json in sorted(folder.glob("*/run.json")):
        if run_json.parent.name.startswith("."):  # a run being staged
            continue
        try:
            info = json.loads(run_json.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if info.get("status") == "running" and runner_alive(info) is False:
            info["status"] = "died"
            info.setdefault("error", None)
            info["error"] = info["error"] or "the runner process is gone"
        info["run_dir"] = str(run_json.parent)
        out.append(info)
    return out


def _same_parameters(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    def canon(d):
        return json.dumps(d, sort_keys=True, default=str)

    return canon(a) == canon(b)


def find_reusable(chapter: str, runs: str | Path, parameters: Mapping[str, Any],
                  source: str) -> dict | None:
    """The newest finished ``ok`` run of ``chapter`` with this source hash and exactly these
    (full) parameters, or None."""
    for info in reversed(list_runs(chapter, runs)):
        if info.get("status") == "ok" and info.get("source_hash") == source \
                and _same_parameters(info.get("parameters") or {}, parameters):
            return info
    return None


def latest_run(chapter: str, runs: str | Path, *, status: str = "ok",
               source: str | None = None, defaults_only: bool = False) -> dict | None:
    """The newest run of ``chapter`` with ``status`` (and, if given, this source hash, and no
    parameter overrides)."""
    for info in reversed(list_runs(chapter, runs)):
        if info.get("status") != status:
            continue
        if source is not None and info.get("source_hash") != source:
            continue
        if defaults_only and (info.get("overrides") or info.get("injected")):
            continue
        return info
    return None


# --------------------------------------------------------------------------------------------
# Execution
# --------------------------------------------------------------------------------------------
@dataclass
class RunResult:
    chapter: str
    run_dir: Path
    status: str
    wall_s: float
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class _PeakRSS:
    """Polls the resident memory of the descendants of a process (MiB)."""

    def __init__(self, pid: int, interval: float = 0.25):
        self.pid, self.interval, self.peak = pid, interval, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        try:
            import psutil
        except ImportError:
            return
        try:
            proc = psutil.Process(self.pid)
        except psutil.Error:
            return
        while not self._stop.is_set():
            try:
                procs = proc.children(recursive=True)  # not the supervisor itself
                total = 0
                for p in procs:
                    try:
                        total += p.memory_info().rss
                    except psutil.Error:
                        pass
                self.peak = max(self.peak, total / 2**20)
            except psutil.Error:
                return
            self._stop.wait(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=2)


def kernel_env(run_dir: Path, root: Path, *, offline: bool = True) -> dict[str, str]:
    """Environment for the executing kernel: run folder, inline plots, and (unless
    ``offline=False``, used for paper-scale runs that download checkpoints) offline hubs.
    Variables already set by the user always win."""
    env = dict(os.environ)
    env["TOKENBOOK_RUN_DIR"] = str(run_dir)
    if offline:
        env.setdefault("HF_HUB_OFFLINE", "1")
        env.setdefault("TRANSFORMERS_OFFLINE", "1")
        env.setdefault("HF_DATASETS_OFFLINE", "1")
    # Agg (e.g. inherited from a test process) would swallow every figure in the notebook
    env["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    return env


class _Watchdog:
    """Terminates ``proc`` (the supervisor, which stops the whole run's tree) once
    ``timeout_s`` seconds have passed, whether or not the kernel prints anything."""

    def __init__(self, proc: subprocess.Popen, timeout_s: float | None):
        self.expired = False
        self._proc = proc
        self._timer = None if timeout_s is None else threading.Timer(timeout_s, self._expire)

    def _expire(self) -> None:
        self.expired = True
        self._proc.terminate()

    def __enter__(self) -> "_Watchdog":
        if self._timer is not None:
            self._timer.daemon = True
            self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._timer is not None:
            self._timer.cancel()


def run_chapter(chapter: Chapter | str, overrides: Mapping[str, Any] | None = None, *,
                root: str | Path | None = None, out: str | Path | None = None,
                inject: bool | None = None, quiet: bool = False,
                timeout_s: float | None = None) -> RunResult:
    """Execute ``chapter`` with validated ``overrides`` into a new run folder.

    ``inject=False`` executes the notebook exactly as written (no papermill parameter cell),
    which is what the book build does so the executed code equals the ``.py``; by default
    parameters are injected only when there are overrides.
    """
    if timeout_s is not None and not (isinstance(timeout_s, (int, float)) and
                                      math.isfinite(timeout_s) and timeout_s > 0):
        raise RunnerError(f"timeout_s must be a finite number of seconds > 0, got {timeout_s!r}")
    root = Path(root).resolve() if root is not None else find_root()
    if isinstance(chapter, str):
        chapter = get_chapter(chapter, root)
    overrides = validate(chapter, overrides or {})
    check_requirements(chapter, {**chapter.parameters, **overrides})
    if inject is None:
        inject = bool(overrides)
    if overrides and not inject:
        raise RunnerError("parameter overrides need inject=True")

    run_id = new_run_id()
    parent = runs_root(root, out) / chapter.name
    run_dir = parent / run_id
    params = {**chapter.parameters, **overrides}
    info: dict[str, Any] = {
        "chapter": chapter.name, "run_id": run_id, "parameters": params,
        "overrides": dict(overrides), "injected": bool(inject), "seed": params.get("seed"),
        "git_commit": git_commit(root), "versions": versions(),
        "source_hash": source_hash(chapter), "notebook": f"{chapter.name}.ipynb",
        "source": str(chapter.path.relative_to(root)) if chapter.path.is_relative_to(root)
        else str(chapter.path),
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "status": "running", "wall_s": None, "peak_rss_mb": None, "error": None,
        "command": sys.argv, "pid": os.getpid(), "pid_started": _process_started(os.getpid()),
        "host": socket.gethostname(),
    }
    # stage the folder with its run.json, then rename: no run folder without a run.json

    try:
        parent.mkdir(parents=True, exist_ok=True)
        clean_stale(parent)  # staging folders of runners that died
        staging = parent / f".{run_id}.{tmp_tag()}"
        staging.mkdir()
    except OSError as exc:
        raise RunnerError(f"cannot create a run folder in {parent} ({exc.strerror}); give a "
                          f"writable --out folder or free some space") from None
    try:
        write_json_atomic(info, staging / "run.json")
        (staging / "figures").mkdir()
        os.rename(staging, run_dir)
    except OSError as exc:  # e.g. disk full
        shutil.rmtree(staging, ignore_errors=True)
        raise RunnerError(f"cannot write the run folder {run_dir} ({exc.strerror}); free some "
                          f"space or give another --out folder") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise

    import jupytext

    executed = run_dir / f"{chapter.name}.ipynb"
    scratch = Path(tempfile.gettempdir())
    clean_stale(scratch, prefix="tokenbook-")  # input notebooks of runners killed before papermill
    tmp = Path(tempfile.mkdtemp(prefix=f"tokenbook-{chapter.name}.{tmp_tag()}-", dir=scratch))
    t0 = time.perf_counter()
    error = None
    proc = None
    peak_rss = 0.0
    try:
        source_nb = tmp / f"{chapter.name}.in.ipynb"
        text = chapter.path.read_text()
        (run_dir / f"{chapter.name}.py").write_text(text)  # exactly the code this run executed
        nb = jupytext.reads(text, fmt="py:percent")
        pfile = tmp / "parameters.yaml"
        cmd = [sys.executable, "-m", "papermill", str(source_nb), str(executed),
               "-k", "python3", "--cwd", str(root)]
        if inject:
            cmd += ["-f", str(pfile)]
        if quiet:
            cmd += ["--no-progress-bar"]
        offline = params.get("scale") != "paper"  # paper scale downloads real checkpoints
        # the supervisor stops papermill's whole tree (the kernel runs in a session of its own)
        # when this process is interrupted or dies, and removes the temporary folder
        supervised = [sys.executable, "-m", "tokenbook.book.supervise", "--watch", str(os.getpid()),
                      "--run-json", str(run_dir / "run.json"), "--cleanup", str(tmp), "--", *cmd]
        env = kernel_env(run_dir, root, offline=offline)
        for attempt in range(1, KERNEL_START_ATTEMPTS + 1):
            # the input files, again on a retry (the supervisor removes ``tmp`` when it ends)
            tmp.mkdir(exist_ok=True)
            jupytext.write(nb, source_nb, fmt="ipynb")
            if inject:
                pfile.write_text(yaml.safe_dump(dict(overrides), sort_keys=False))
            left = None if timeout_s is None else timeout_s - (time.perf_counter() - t0)
            proc = subprocess.Popen(supervised, env=env, cwd=root, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, errors="replace",
                                    start_new_session=True)
            rc, tail, expired, peak = _follow(proc, left, quiet)
            peak_rss = max(peak_rss, peak)
            error = None
            if expired:
                error = f"timed out after {timeout_s:.0f} s"
            elif rc != 0:
                error = _papermill_error(tail) or f"papermill exited with code {rc}"
            info["kernel_start_attempts"] = attempt
            if error is None:
                break
            # papermill's own output, the kernel's stderr included
            (run_dir / "papermill.log").write_text("".join(tail))
            if not _kernel_never_started(error) or attempt == KERNEL_START_ATTEMPTS:
                break
            # the kernel died before running a cell (e.g. a port it was given was taken by
            # another process in the meantime): nothing ran, so start it again
            print(f"[tokenbook] {chapter.name}: the kernel did not start ({error}); "
                  f"attempt {attempt + 1} of {KERNEL_START_ATTEMPTS}", file=sys.stderr)
    except BaseException as exc:  # KeyboardInterrupt, SystemExit, OSError: record, clean up
        interrupted = isinstance(exc, (KeyboardInterrupt, SystemExit))
        reason = f"interrupted ({type(exc).__name__})" if interrupted else (
            f"{exc.strerror or exc} while writing the run" if isinstance(exc, OSError)
            else f"{type(exc).__name__}: {exc}")
        info.update(status="failed", error=reason, wall_s=round(time.perf_counter() - t0, 2),
                    peak_rss_mb=None,
                    finished=datetime.now(timezone.utc).isoformat(timespec="seconds"))
        _record_status(info, run_dir / "run.json")  # first: a second Ctrl-C cannot undo it
        if proc is not None:
            _stop_supervisor(proc)
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError):  # e.g. the disk filled after the folder was made
            raise RunnerError(f"{chapter.name}: {reason} ({run_dir}); free some space or give "
                              f"another --out folder") from None
        raise
    wall = time.perf_counter() - t0
    shutil.rmtree(tmp, ignore_errors=True)
    claims = run_dir / "claims.json"
    info.update(status="ok" if error is None else "failed", error=error, wall_s=round(wall, 2),
                peak_rss_mb=round(peak_rss, 1),
                finished=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                n_claims=len(json.loads(claims.read_text())) if claims.exists() else 0,
                figures=sorted(p.name for p in (run_dir / "figures").glob("*")))
    if not _record_status(info, run_dir / "run.json"):
        raise RunnerError(f"{chapter.name}: cannot write {run_dir / 'run.json'} (disk full?); "
                          f"free some space")
    if error is None:
        if not quiet:
            print(f"[tokenbook] {chapter.name}: ok in {wall:.1f} s -> {run_dir}", file=sys.stderr)
            if not claims.exists():
                print(f"[tokenbook] warning: {chapter.name} wrote no claims.json "
                      f"(end the chapter with tokenbook.claims.report([...]))", file=sys.stderr)
    else:  # a failure is always reported, with where its partial outputs are
        print(f"[tokenbook] {chapter.name}: FAILED after {wall:.1f} s: {error}\n"
              f"[tokenbook] partial outputs kept in {run_dir} "
              f"(executed notebook: {executed})", file=sys.stderr)
    return RunResult(chapter.name, run_dir, info["status"], wall, error)


KERNEL_START_ATTEMPTS = 3
_KERNEL_NEVER_STARTED = ("Kernel died before replying to kernel_info", "Kernel didn't respond in")


def _kernel_never_started(error: str) -> bool:
    """True when papermill failed because its kernel never became ready (so no cell ran)."""
    return any(text in error for text in _KERNEL_NEVER_STARTED)


def _follow(proc: subprocess.Popen, timeout_s: float | None, quiet: bool
            ) -> tuple[int, list[str], bool, float]:
    """Wait for the supervised papermill ``proc``, echoing its output unless ``quiet``.
    Returns (exit status, the last 200 lines, whether ``timeout_s`` expired, peak RSS in MiB)."""
    tail: list[str] = []
    # the timeout is a timer, not a check per output line: a silent kernel is stopped too
    watchdog = _Watchdog(proc, timeout_s)
    with _PeakRSS(proc.pid) as rss, watchdog:
        assert proc.stdout is not None
        for line in proc.stdout:
            tail.append(line)
            del tail[:-200]
            if not quiet:
                sys.stderr.write(line)
        rc = proc.wait()
    return rc, tail, watchdog.expired, rss.peak


def _record_status(info: Mapping[str, Any], run_json: Path) -> bool:
    """Write ``run.json`` atomically; when that fails (a full disk has no room for the
    temporary), overwrite the file in place, shortened to the essentials. True if written."""
    try:
        write_json_atomic(dict(info), run_json)
        return True
    except OSError:
        pass
    keep = {k: info.get(k) for k in ("chapter", "run_id", "status", "error", "wall_s", "pid",
                                     "host")}
    try:
        with open(run_json, "r+b") as f:
            data = json.dumps(keep).encode()
            f.write(data)
            f.truncate(len(data))
        return True
    except OSError:
        return False


def _stop_supervisor(proc: subprocess.Popen) -> None:
    """Terminate the supervisor (it stops the run's tree) and wait for it; further Ctrl-Cs
    while waiting escalate to SIGKILL instead of leaving the run half-recorded."""
    proc.terminate()
    for _ in range(3):
        try:
            proc.wait(timeout=20)
            return
        except subprocess.TimeoutExpired:
            proc.kill()
        except KeyboardInterrupt:
            proc.terminate()


def _papermill_error(lines: list[str]) -> str | None:
    """The exception line of papermill's report, if any."""
    for line in reversed(lines):
        s = line.strip()
        if s and ("Error" in s or "Exception" in s) and not s.startswith(("File ", "Cell ")):
            return s[:500]
    return None


# --------------------------------------------------------------------------------------------
# Sweeps (Dask)
# --------------------------------------------------------------------------------------------
def parse_sweep_values(text: str, spec: ParamSpec | None = None) -> list[Any]:
    """``"1,2,3"`` → ``[1, 2, 3]``; a YAML list ``"[a, b]"`` is read as a list of values. For a
    list-typed parameter (``spec``) a YAML list of non-lists is one value: ``"[0, 1]"`` →
    ``[[0, 1]]`` (give several as ``"[[0, 1], [2, 3]]"``)."""
    value = parse_value(text) if text.strip().startswith("[") else None
    if isinstance(value, list):
        if spec is not None and "list" in spec.types and not all(
                isinstance(v, list) for v in value):
            return [value]
        return value
    return [parse_value(part.strip()) for part in text.split(",") if part.strip() != ""]


def sweep_grid(chapter: Chapter, grid: Mapping[str, list], fixed: Mapping[str, Any] | None = None
               ) -> list[dict[str, Any]]:
    """Every combination of ``grid`` values (on top of ``fixed``), each validated up front."""
    fixed = dict(fixed or {})
    names = list(grid)
    combos = []
    for values in itertools.product(*(grid[n] for n in names)):
        combo = validate(chapter, {**fixed, **dict(zip(names, values))})
        check_requirements(chapter, {**chapter.parameters, **combo})
        combos.append(combo)
    if not combos:
        raise RunnerError("the sweep has no combinations (give -p NAME V1,V2,...)")
    return combos


def _sweep_task(name: str, overrides: dict, root: str, out: str | None) -> dict:
    result = run_chapter(name, overrides, root=root, out=out, inject=True, quiet=True)
    return {"chapter": name, "overrides": overrides, "status": result.status,
            "run_dir": str(result.run_dir), "wall_s": round(result.wall_s, 2),
            "error": result.error}


def sweep(chapter: Chapter | str, grid: Mapping[str, list], *, fixed: Mapping | None = None,
          root: str | Path | None = None, out: str | Path | None = None,
          scheduler: str | None = None, n_workers: int | None = None, rerun: bool = False,
          scheduler_timeout_s: float = 5.0, quiet: bool = False) -> list[dict]:
    """One run per combination of ``grid``, fanned out through Dask.

    A combination that already has a finished ``ok`` run with the same chapter source hash and
    the same parameters is reused (its summary has ``reused: True``) unless ``rerun``; only the
    missing, failed or died ones are computed, so a killed sweep resumes where it stopped.

    ``scheduler`` is the address of an existing cluster's scheduler (e.g. one started by
    dask-jobqueue's ``SLURMCluster``), reached within ``scheduler_timeout_s``; without it a
    ``LocalCluster`` with one single-threaded worker process per run (at most ``n_workers``,
    default: CPU count) is started and stopped. Every combination is validated before anything
    runs. Returns one summary per combination, in grid order.
    """
    if not (isinstance(scheduler_timeout_s, (int, float)) and math.isfinite(scheduler_timeout_s)
            and scheduler_timeout_s > 0):
        raise RunnerError(f"scheduler_timeout_s must be a finite number of seconds > 0, got "
                          f"{scheduler_timeout_s!r}")
    if n_workers is not None and (isinstance(n_workers, bool) or not isinstance(n_workers, int)
                                  or n_workers < 1):
        raise RunnerError(f"n_workers must be a whole number >= 1 (or None: one per CPU), got "
                          f"{n_workers!r}")
    root = Path(root).resolve() if root is not None else find_root()
    if isinstance(chapter, str):
        chapter = get_chapter(chapter, root)
    combos = sweep_grid(chapter, grid, fixed)
    out_s = str(Path(out).resolve()) if out is not None else None
    runs = runs_root(root, out)
    current = source_hash(chapter)
    results: list[dict | None] = [None] * len(combos)
    todo = []
    for i, combo in enumerate(combos):
        found = None if rerun else find_reusable(chapter.name, runs,
                                                 {**chapter.parameters, **combo}, current)
        if found is not None:
            results[i] = {"chapter": chapter.name, "overrides": combo, "status": "ok",
                          "run_dir": found["run_dir"], "wall_s": found.get("wall_s"),
                          "error": None, "reused": True}
        else:
            todo.append(i)
    n_reused = len(combos) - len(todo)
    if not quiet:
        print(f"[tokenbook] sweep {chapter.name}: {n_reused} of {len(combos)} runs reused"
              + (" (same source and parameters; --rerun recomputes them)" if n_reused else ""),
              file=sys.stderr)
    if not todo:
        return results  # type: ignore[return-value]
    from distributed import Client, LocalCluster

    cluster = None
    if scheduler:
        try:
            client = Client(scheduler, timeout=f"{scheduler_timeout_s}s")
        except (OSError, TimeoutError, ValueError) as exc:
            raise RunnerError(f"cannot reach the Dask scheduler at {scheduler!r} within "
                              f"{scheduler_timeout_s:.0f} s ({type(exc).__name__}); start it, "
                              f"check the address, or drop --scheduler to use a local cluster"
                              ) from None
    else:
        workers = max(1, min(len(todo), n_workers or os.cpu_count() or 1))

        with worker_environ():
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                   dashboard_address=":0")
        client = Client(cluster)
    try:
        futures = [client.submit(_sweep_task, chapter.name, combos[i], str(root), out_s,
                                 pure=False) for i in todo]
        for i, res in zip(todo, client.gather(futures)):
            results[i] = {**res, "reused": False}
    finally:  # bounded, so that Ctrl-C ends the sweep promptly even while a run is busy
        client.close(timeout=10)
        if cluster is not None:
            cluster.close(timeout=30)
    return results  # type: ignore[return-value]
