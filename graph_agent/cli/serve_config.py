"""A config file for ``graph-agent serve``: several targets and the server's options in one place.

``graph-agent serve CONFIG.json`` (or ``.toml``) reads:

- ``targets``: a list of ``MODULE:OBJECT`` (each assistant's id is its graph's or agent's name)
  or a table ``{assistant id: MODULE:OBJECT}``;
- or LangGraph's ``langgraph.json`` shape, ``{"graphs": {"id": "./path.py:object"}}`` (a value
  may also be ``{"path": ...}``): each key is an assistant id, and ``http.cors.allow_origins``
  is read as ``cors_origins``. LangGraph's other keys (``dependencies``, ``env``, the rest of
  ``http``, ...) are not ours: they are named on stderr and left alone;
- optionally ``db``, ``postgres``, ``redis``, ``host``, ``port``, ``workers``,
  ``max_body_bytes``, ``shared_threads`` (true/false): what the options of the same names set.
  An option given on the command line wins;
- optionally ``allow_hosts``, ``cors_origins`` and ``webhook_allow``, lists: what
  ``--allow-host``, ``--cors-origin`` and ``--webhook-allow`` add (the command line's are added
  to the file's); LangGraph's ``webhooks.url.allowed_domains`` is read as ``webhook_allow``;
- optionally ``store``, LangGraph's ``{"index": {...}, "ttl": {...}}``: the server's store's
  index and TTLs (see :mod:`graph_agent.cli.serve_store`; the ``--store-*`` options win);
- optionally ``checkpointer.ttl`` (LangGraph's: ``strategy``, ``default_ttl`` and
  ``sweep_interval_minutes``, what ``--ttl-strategy``, ``--thread-ttl`` and
  ``--sweep-interval`` set) and ``checkpoint_keep`` (``--checkpoint-keep``);
- optionally ``input_keys``, a table ``{assistant id: [key, ...]}``: the only state keys
  clients may send to that assistant (``--input-keys``). A target given as a table
  ``{"path": ..., "input_keys": [...]}`` may say it there instead;
- optionally ``auth``, LangGraph's ``{"path": "./auth.py:auth"}`` (or the ``MODULE:OBJECT``
  alone): ``--auth``; and in ``http``, ``app`` (``--app``) and ``enable_custom_route_auth``
  (``--app-auth``).

API keys are never read from the file: give them on the command line or in the environment.

File paths in the file (a target's ``path.py``, ``db``) are relative to the file's folder, as
LangGraph reads ``langgraph.json``; a dotted module is imported from that folder too.
"""

from __future__ import annotations

import functools
import json
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graph_agent.cli.errors import EXIT_USAGE, CliError
from graph_agent.cli.serve_retention import read_checkpointer
from graph_agent.cli.serve_store import read_store_table

__all__ = ["CONFIG_SUFFIXES", "ServeConfig", "is_config", "read_config"]

CONFIG_SUFFIXES = (".json", ".toml")
_OPTIONS: dict[str, type[Any]] = {
    "db": str,
    "postgres": str,
    "redis": str,
    "host": str,
    "port": int,
    "workers": int,
    "max_body_bytes": int,
    "shared_threads": bool,
    "checkpoint_keep": int,
}
_LISTS = ("allow_hosts", "cors_origins", "webhook_allow")
"""Options that are lists of strings."""
_WORDS = {int: "an integer", str: "a string", bool: "true or false"}
_EXAMPLE = '{"graphs": {"chain": "./graphs.py:chain"}, "port": 8123}'


@dataclass(kw_only=True)
class ServeConfig:
    """What a config file says: ``targets`` as ``(assistant id or None, MODULE:OBJECT)`` pairs
    (``None``: the target's own name), and the options it sets."""

    targets: list[tuple[str | None, str]] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)


def is_config(target: str) -> bool:
    """Whether a command-line TARGET names a config file rather than ``MODULE:OBJECT``."""
    return target.lower().endswith(CONFIG_SUFFIXES) and ":" not in Path(target).name


def read_config(path: str) -> ServeConfig:
    """Read the config file at ``path``.

    Raises:
        CliError: the file is missing, is not JSON/TOML, or says something malformed.
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}", _EXAMPLE, EXIT_USAGE) from exc
    try:
        data: Any = tomllib.loads(text) if file.suffix.lower() == ".toml" else json.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        kind = file.suffix[1:].upper()
        raise CliError(f"{path} is not valid {kind}: {exc}", "", EXIT_USAGE) from exc
    if not isinstance(data, dict):
        raise CliError(f"{path} must hold an object (a table)", _EXAMPLE, EXIT_USAGE)
    folder = file.resolve().parent
    config = ServeConfig()
    input_keys: dict[str, list[str]] = {}
    for key, value in data.items():
        if key in ("targets", "graphs"):
            config.targets += _targets(path, key, value, folder, input_keys)
        elif key == "input_keys":
            if not isinstance(value, dict):
                raise CliError(
                    f"{path}: input_keys must be a table of key lists by assistant id",
                    '"input_keys": {"chain": ["x"]}',
                    EXIT_USAGE,
                )
            for name, keys in value.items():
                input_keys[str(name)] = _key_list(path, f"input_keys.{name}", keys)
        elif key in _LISTS:
            _add_list(config, key, _string_list(path, key, value))
        elif key == "store":
            relative = functools.partial(_relative_to, folder)
            config.options["store"] = read_store_table(path, value, relative, config.ignored)
        elif key == "http" and isinstance(value, dict):
            _read_http(path, value, config, folder)
        elif key == "checkpointer":
            config.options.update(read_checkpointer(path, value))
        elif key == "auth":
            _read_auth(path, value, config, folder)
        elif key == "webhooks" and isinstance(value, dict):
            _read_webhooks(path, value, config)
        elif key in _OPTIONS:
            wanted = _OPTIONS[key]
            if not isinstance(value, wanted) or isinstance(value, bool) is not (wanted is bool):
                raise CliError(f"{path}: {key} must be {_WORDS[wanted]}", _EXAMPLE, EXIT_USAGE)
            config.options[key] = str(folder / str(value)) if key == "db" else value
        else:
            config.ignored.append(key)
    if input_keys:
        config.options["input_keys"] = input_keys
    if not config.targets:
        raise CliError(f"{path} lists no targets", f"e.g. {_EXAMPLE}", EXIT_USAGE)
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))  # its dotted modules are imported from its folder
    return config


def _targets(
    path: str, key: str, value: Any, folder: Path, input_keys: dict[str, list[str]]
) -> list[tuple[str | None, str]]:
    if isinstance(value, list):
        pairs: list[tuple[str | None, Any]] = [(None, item) for item in value]
    elif isinstance(value, dict):
        pairs = [(str(name), item) for name, item in value.items()]
    else:
        raise CliError(
            f"{path}: {key} must be a list of MODULE:OBJECT or a table of them by id",
            _EXAMPLE,
            EXIT_USAGE,
        )
    found: list[tuple[str | None, str]] = []
    for name, item in pairs:
        spec = item.get("path") if isinstance(item, dict) else item
        where = f"{key}.{name}" if name is not None else key
        if not isinstance(spec, str) or ":" not in spec:
            raise CliError(f"{path}: {where} must be MODULE:OBJECT, got {spec!r}", _EXAMPLE)
        if isinstance(item, dict) and "input_keys" in item:
            if name is None:
                raise CliError(
                    f"{path}: {spec} sets input_keys but has no assistant id",
                    'list the targets in a table by id, or give "input_keys": {"NAME": [...]}',
                    EXIT_USAGE,
                )
            input_keys[name] = _key_list(path, f"{where}.input_keys", item["input_keys"])
        found.append((name, _relative_to(folder, spec)))
    return found


def _read_auth(path: str, auth: Any, config: ServeConfig, folder: Path) -> None:
    """LangGraph's ``auth`` table: its ``path`` is ``--auth`` (the rest is named as ignored)."""
    table = auth if isinstance(auth, dict) else {"path": auth}
    for key, value in table.items():
        if key == "path":
            config.options["auth"] = _spec(path, "auth.path", value, folder)
        else:
            config.ignored.append(f"auth.{key}")


def _spec(path: str, where: str, value: Any, folder: Path) -> str:
    if not isinstance(value, str) or ":" not in value:
        raise CliError(
            f"{path}: {where} must be MODULE:OBJECT, got {value!r}",
            '"auth": {"path": "./auth.py:auth"}',
            EXIT_USAGE,
        )
    return _relative_to(folder, value)


def _read_http(path: str, http: dict[str, Any], config: ServeConfig, folder: Path) -> None:
    """LangGraph's ``http`` table: its ``cors.allow_origins``, ``app`` and
    ``enable_custom_route_auth`` are ours; the rest is named as ignored (``http.cors.max_age``,
    ...)."""
    for key, value in http.items():
        if key == "app":
            config.options["app"] = _spec(path, "http.app", value, folder)
        elif key == "enable_custom_route_auth":
            if not isinstance(value, bool):
                raise CliError(f"{path}: http.{key} must be true or false", "", EXIT_USAGE)
            config.options["app_auth"] = value
        elif key == "cors" and isinstance(value, dict):
            for name, setting in value.items():
                if name == "allow_origins":
                    origins = _string_list(path, "http.cors.allow_origins", setting)
                    _add_list(config, "cors_origins", origins)
                else:
                    config.ignored.append(f"http.cors.{name}")
        else:
            config.ignored.append(f"http.{key}")


def _read_webhooks(path: str, webhooks: dict[str, Any], config: ServeConfig) -> None:
    """LangGraph's ``webhooks`` table: ``url.allowed_domains`` is ``webhook_allow``; the rest is
    named as ignored."""
    for key, value in webhooks.items():
        if key == "url" and isinstance(value, dict):
            for name, setting in value.items():
                if name == "allowed_domains":
                    hosts = _string_list(path, "webhooks.url.allowed_domains", setting)
                    _add_list(config, "webhook_allow", hosts)
                else:
                    config.ignored.append(f"webhooks.url.{name}")
        else:
            config.ignored.append(f"webhooks.{key}")


def _string_list(path: str, where: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise CliError(
            f"{path}: {where} must be a list of strings",
            '"cors_origins": ["http://localhost:3000"]',
            EXIT_USAGE,
        )
    return list(value)


def _add_list(config: ServeConfig, key: str, values: list[str]) -> None:
    found: list[str] = config.options.setdefault(key, [])
    found += [value for value in values if value not in found]


def _key_list(path: str, where: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(k, str) and k for k in value):
        raise CliError(
            f"{path}: {where} must be a list of state key names", '["question"]', EXIT_USAGE
        )
    return list(value)


def _relative_to(folder: Path, spec: str) -> str:
    """``spec`` with a file path in it made relative to ``folder`` (a dotted module stays)."""
    module, _, obj = spec.rpartition(":")
    if module.endswith(".py") or "/" in module or "\\" in module:
        module = str(folder / module)
    return f"{module}:{obj}"
