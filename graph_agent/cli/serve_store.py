"""The server's store settings: its index (semantic search) and TTLs, from a config file's
``store`` table, in the shape of LangGraph's ``langgraph.json``, and the ``--store-*`` options
of ``graph-agent serve`` (an option wins over the file)::

    "store": {
        "index": {"embed": "openai:text-embedding-3-small", "dims": 1536, "fields": ["text"]},
        "ttl": {"default_ttl": 10080, "refresh_on_read": true, "sweep_interval_minutes": 60}
    }

``embed`` is ``MODULE:FUNCTION`` or ``path/to/file.py:FUNCTION`` (a function taking a list of
texts and returning one vector per text; a class is made with no arguments, a LangChain
``Embeddings`` is called through its ``embed_documents``), or a provider string:
``openai:MODEL`` (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``) or ``ollama:MODEL``
(``OLLAMA_BASE_URL``, default ``http://localhost:11434``). Without an index, a search with a
query is a 422 naming the fix. The sweep of expired items runs on the server's upkeep
(``Api.add_periodic``).
"""

from __future__ import annotations

import argparse
import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from graph_agent.cli.errors import EXIT_USAGE, CliError

__all__ = [
    "STORE_SWEEP_MINUTES",
    "StoreSettings",
    "add_store_options",
    "add_store_sweep",
    "read_store_table",
    "store_settings",
]

STORE_SWEEP_MINUTES = 10.0
"""Minutes between the sweeps of the server's store's expired items by default (they are never
returned either way; the sweep frees their space)."""
_INDEX_KEYS = ("embed", "dims", "fields")
_TTL_KEYS = ("default_ttl", "refresh_on_read", "sweep_interval_minutes")
_EXAMPLE = (
    '"store": {"index": {"embed": "openai:text-embedding-3-small", "dims": 1536, '
    '"fields": ["text"]}, "ttl": {"default_ttl": 1440}}'
)
_OLLAMA_URL = "http://localhost:11434"


@dataclass(frozen=True, kw_only=True)
class StoreSettings:
    """What the server's store is opened with: :meth:`options` for its class, and the
    minutes between sweeps."""

    index: dict[str, Any] | None = None
    """``{"embed": callable, "dims": ..., "fields": [...]}``, the embedder resolved."""
    default_ttl: float | None = None
    refresh_on_read: bool = True
    sweep_minutes: float = STORE_SWEEP_MINUTES

    def options(self) -> dict[str, Any]:
        """The keyword arguments of ``SqliteStore`` / ``PostgresStore``."""
        return {
            "index": self.index,
            "default_ttl": self.default_ttl,
            "refresh_on_read": self.refresh_on_read,
        }


def add_store_options(parser: argparse.ArgumentParser) -> None:
    """The ``--store-*`` options of ``serve``."""
    parser.add_argument(
        "--store-embed",
        metavar="SPEC",
        help="index the store for search by meaning with this embedder: MODULE:FUNCTION, "
        "file.py:FUNCTION, openai:MODEL or ollama:MODEL (the config file's store.index.embed)",
    )
    parser.add_argument(
        "--store-dims", type=int, metavar="N", help="the embedder's vector length (checked)"
    )
    parser.add_argument(
        "--store-field",
        action="append",
        metavar="PATH",
        help="a field of the items' values to embed (repeatable; default: the whole value)",
    )
    parser.add_argument(
        "--store-ttl",
        type=float,
        metavar="MINUTES",
        help="minutes a store item lives when its put gives no ttl (default: forever)",
    )
    parser.add_argument(
        "--store-sweep",
        type=float,
        metavar="MINUTES",
        help=f"minutes between sweeps of expired store items (default: {STORE_SWEEP_MINUTES:g})",
    )
    parser.add_argument(
        "--store-no-refresh",
        action="store_true",
        default=None,
        help="a read of a store item does not restart its TTL unless it asks (refresh_ttl)",
    )


def read_store_table(
    path: str, table: Any, relative: Callable[[str], str], ignored: list[str]
) -> dict[str, Any]:
    """A config file's ``store`` table checked (``relative`` makes a file path in ``embed``
    relative to the file's folder); keys that are not ours go to ``ignored``.

    Raises:
        CliError: a value is malformed; the message names its key (``store.index.dims``).
    """
    if not isinstance(table, dict):
        raise _bad(path, "store", "must be a table with index and/or ttl")
    found: dict[str, Any] = {}
    for key, value in table.items():
        if key == "index":
            found["index"] = _index_table(path, value, relative, ignored)
        elif key == "ttl":
            found["ttl"] = _ttl_table(path, value, ignored)
        else:
            ignored.append(f"store.{key}")
    return found


def _index_table(
    path: str, index: Any, relative: Callable[[str], str], ignored: list[str]
) -> dict[str, Any]:
    if not isinstance(index, dict):
        raise _bad(path, "store.index", "must be a table: {embed, dims, fields}")
    embed = index.get("embed")
    if not isinstance(embed, str) or ":" not in embed:
        raise _bad(
            path,
            "store.index.embed",
            f"must be MODULE:FUNCTION, file.py:FUNCTION or PROVIDER:MODEL, got {embed!r:.60}",
        )
    found: dict[str, Any] = {"embed": relative(embed)}
    if "dims" in index:
        found["dims"] = _dims(
            index["dims"],
            lambda: _bad(path, "store.index.dims", "must be the embedder's vector length (>= 1)"),
        )
    if "fields" in index:
        fields = index["fields"]
        if not isinstance(fields, list) or not fields or not all(_text(f) for f in fields):
            raise _bad(path, "store.index.fields", 'must be a list of field paths, e.g. ["text"]')
        found["fields"] = list(fields)
    ignored += [f"store.index.{key}" for key in index if key not in _INDEX_KEYS]
    return found


def _ttl_table(path: str, ttl: Any, ignored: list[str]) -> dict[str, Any]:
    if not isinstance(ttl, dict):
        raise _bad(path, "store.ttl", "must be a table: {default_ttl, refresh_on_read, ...}")
    found: dict[str, Any] = {}
    for key in ("default_ttl", "sweep_interval_minutes"):
        if key in ttl and ttl[key] is not None:
            if not _minutes(ttl[key]):
                raise _bad(path, f"store.ttl.{key}", "must be a number of minutes above 0")
            found[key] = float(ttl[key])
    if "refresh_on_read" in ttl:
        if not isinstance(ttl["refresh_on_read"], bool):
            raise _bad(path, "store.ttl.refresh_on_read", "must be true or false")
        found["refresh_on_read"] = ttl["refresh_on_read"]
    ignored += [f"store.ttl.{key}" for key in ttl if key not in _TTL_KEYS]
    return found


def store_settings(args: argparse.Namespace) -> StoreSettings:
    """The store settings of the options and the config files' ``store`` table
    (``args.store_config``), the options winning; the embedder imported or made here.

    Raises:
        CliError: an option is out of range, or the embedder cannot be had (naming it).
    """
    config: dict[str, Any] = getattr(args, "store_config", None) or {}
    index: dict[str, Any] = dict(config.get("index", {}))
    ttl: dict[str, Any] = config.get("ttl", {})
    embed_option = getattr(args, "store_embed", None)
    for key, option in (("embed", embed_option), ("fields", getattr(args, "store_field", None))):
        if option:
            index[key] = option
    dims = getattr(args, "store_dims", None)
    if dims is not None:
        index["dims"] = _dims(
            dims, lambda: CliError("--store-dims must be at least 1", "", EXIT_USAGE)
        )
    if index and "embed" not in index:
        raise CliError(
            "--store-dims and --store-field need an embedder",
            "add --store-embed MODULE:FUNCTION (or store.index.embed in the config file)",
            EXIT_USAGE,
        )
    where = "--store-embed" if embed_option else "store.index.embed"
    resolved = {**index, "embed": _embedder(index["embed"], where)} if index else None
    default_ttl = _option_minutes(args, "store_ttl", "--store-ttl", ttl.get("default_ttl"))
    sweep = _option_minutes(args, "store_sweep", "--store-sweep", ttl.get("sweep_interval_minutes"))
    no_refresh = getattr(args, "store_no_refresh", None)
    return StoreSettings(
        index=resolved,
        default_ttl=default_ttl,
        refresh_on_read=ttl.get("refresh_on_read", True) if no_refresh is None else False,
        sweep_minutes=STORE_SWEEP_MINUTES if sweep is None else sweep,
    )


def add_store_sweep(api: Any, settings: StoreSettings) -> None:
    """Sweep the expired items of ``api.store`` every ``settings.sweep_minutes`` on the
    server's upkeep."""
    from graph_agent.serve.tasks import Periodic

    store = api.store

    async def sweep() -> None:
        await store.asweep()

    api.add_periodic(Periodic("store-sweep", settings.sweep_minutes * 60, sweep))


def _embedder(spec: str, where: str) -> Callable[[list[str]], Any]:
    """The embedding function ``spec`` names (see the module docstring)."""
    provider, _, model = spec.partition(":")
    if provider in ("openai", "ollama"):
        return _provider_embedder(provider, model, where)
    from graph_agent.cli.targets import _import, _split

    try:
        module_part, object_part = _split(spec)
        found: Any = _import(module_part)
    except CliError as exc:  # named as the option or key that gave it
        raise CliError(f"{where}: {exc.message}", exc.hint, EXIT_USAGE) from exc
    for attribute in object_part.split("."):
        if not hasattr(found, attribute):
            raise CliError(f"{where}: {module_part} has no {object_part!r}", "", EXIT_USAGE)
        found = getattr(found, attribute)
    if inspect.isclass(found):
        try:
            found = found()
        except Exception as exc:
            raise CliError(
                f"{where}: {spec}() failed: {type(exc).__name__}: {exc}",
                "point at a class made without arguments, or at a function taking texts",
                EXIT_USAGE,
            ) from exc
    documents = getattr(found, "embed_documents", None)
    if callable(documents):  # a LangChain Embeddings
        return lambda texts: documents(texts)
    if not callable(found):
        raise CliError(
            f"{where}: {spec} is a {type(found).__name__}, not an embedding function",
            "point at a function taking a list of texts and returning one vector per text",
            EXIT_USAGE,
        )
    embed: Callable[[list[str]], Any] = found
    return embed


def _provider_embedder(provider: str, model: str, where: str) -> Callable[[list[str]], Any]:
    from graph_agent.store import OpenAIEmbeddings

    if not model:
        raise CliError(f"{where}: {provider}: names no model", f"e.g. {provider}:MODEL", EXIT_USAGE)
    if provider == "ollama":
        base = os.environ.get("OLLAMA_BASE_URL") or _OLLAMA_URL
        return OpenAIEmbeddings(model, f"{base.rstrip('/')}/v1")
    key = os.environ.get("OPENAI_API_KEY")
    base_url = os.environ.get("OPENAI_BASE_URL")
    if not key and not base_url:
        raise CliError(
            f"{where}: openai:{model} needs OPENAI_API_KEY (or OPENAI_BASE_URL for a local "
            "OpenAI-compatible server)",
            "set it in the environment",
            EXIT_USAGE,
        )
    if base_url:
        return OpenAIEmbeddings(model, base_url, api_key=key)
    return OpenAIEmbeddings(model, api_key=key)


def _option_minutes(
    args: argparse.Namespace, attribute: str, option: str, configured: float | None
) -> float | None:
    given = getattr(args, attribute, None)
    if given is None:
        return configured
    if not _minutes(given) or given == float("inf"):
        raise CliError(f"{option} {given:g}: give minutes above 0", f"e.g. {option} 60", EXIT_USAGE)
    return float(given)


def _dims(value: Any, error: Callable[[], CliError]) -> int:
    if type(value) is not int or value < 1:
        raise error()
    return value


def _minutes(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _bad(path: str, key: str, what: str) -> CliError:
    return CliError(f"{path}: {key} {what}", f"e.g. {_EXAMPLE}", EXIT_USAGE)
