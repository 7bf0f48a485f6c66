"""The server's store gets its index and TTLs from the server's config: a config file's
``store.index`` / ``store.ttl`` (LangGraph's ``langgraph.json`` shape) and the ``--store-*``
options; a bad setting is a usage error naming its key; with an index, ``POST
/store/items/search`` ranks by a query (a local, deterministic embedder: no network)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_sync_client

from graph_agent.cli.errors import CliError
from graph_agent.cli.main import build_parser, main
from graph_agent.cli.serve import serve_targets
from graph_agent.cli.serve_config import read_config
from graph_agent.cli.serve_store import (
    STORE_SWEEP_MINUTES,
    StoreSettings,
    add_store_sweep,
    store_settings,
)
from graph_agent.serve import create_app
from graph_agent.store import HashEmbeddings, InMemoryStore
from tests.checkpoint.postgres_db import fresh_schema
from tests.serve.conftest import Server, free_port, wait_until_up
from tests.serve.graphs import chain

ROOT = Path(__file__).resolve().parents[2]
TARGET = f"{ROOT}/tests/serve/store_targets.py:notes"


def _config(tmp_path: Path, store: Any, **more: Any) -> str:
    path = tmp_path / "langgraph.json"
    path.write_text(json.dumps({"graphs": {"notes": TARGET}, "store": store, **more}))
    return str(path)


def _args(*argv: str) -> argparse.Namespace:
    args = build_parser().parse_args(["serve", *argv])
    serve_targets(args)
    return args


def test_the_files_index_and_ttl_open_the_store(tmp_path: Path) -> None:
    (tmp_path / "embedder.py").write_text(
        "def embed(texts):\n    return [[1.0, 0.0]] * len(texts)\n"
    )
    store = {
        "index": {"embed": "./embedder.py:embed", "dims": 2, "fields": ["text"]},
        "ttl": {"default_ttl": 60, "refresh_on_read": False, "sweep_interval_minutes": 5},
    }
    settings = store_settings(_args(_config(tmp_path, store)))
    assert settings.index is not None
    assert settings.index["embed"](["a", "b"]) == [[1.0, 0.0], [1.0, 0.0]]
    assert (settings.index["dims"], settings.index["fields"]) == (2, ["text"])
    assert (settings.default_ttl, settings.refresh_on_read, settings.sweep_minutes) == (
        60,
        False,
        5,
    )
    opened = InMemoryStore(**settings.options())  # what every store class takes
    assert opened.default_ttl == 60 and opened.index is not None


def test_the_options_win_over_the_file(tmp_path: Path) -> None:
    store = {"index": {"embed": "nowhere.at.all:embed", "dims": 9}, "ttl": {"default_ttl": 60}}
    args = _args(
        _config(tmp_path, store),
        "--store-embed",
        "graph_agent.store:HashEmbeddings",  # a class: made without arguments
        "--store-dims",
        "256",
        "--store-field",
        "text",
        "--store-field",
        "title",
        "--store-ttl",
        "5",
        "--store-sweep",
        "1",
        "--store-no-refresh",
    )
    settings = store_settings(args)
    assert settings.index is not None and isinstance(settings.index["embed"], HashEmbeddings)
    assert (settings.index["dims"], settings.index["fields"]) == (256, ["text", "title"])
    assert (settings.default_ttl, settings.sweep_minutes, settings.refresh_on_read) == (5, 1, False)


def test_no_settings_mean_no_index_no_ttl_and_the_default_sweep() -> None:
    settings = store_settings(_args(TARGET))
    assert settings.options() == {"index": None, "default_ttl": None, "refresh_on_read": True}
    assert settings.sweep_minutes == STORE_SWEEP_MINUTES


def test_a_langchain_embeddings_object_is_called_through_embed_documents(tmp_path: Path) -> None:
    (tmp_path / "lc.py").write_text(
        "class Embeddings:\n"
        "    def embed_documents(self, texts):\n"
        "        return [[float(len(t))] for t in texts]\n"
        "embeddings = Embeddings()\n"
    )
    settings = store_settings(_args(_config(tmp_path, {"index": {"embed": "./lc.py:embeddings"}})))
    assert settings.index is not None and settings.index["embed"](["ab", "c"]) == [[2.0], [1.0]]


def test_openai_is_a_provider_string(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    settings = store_settings(_args(TARGET, "--store-embed", "openai:text-embedding-3-small"))
    assert settings.index is not None
    assert repr(settings.index["embed"]) == (
        "OpenAIEmbeddings(model='text-embedding-3-small', base_url='https://api.openai.com/v1')"
    )
    ollama = store_settings(_args(TARGET, "--store-embed", "ollama:nomic-embed-text"))
    assert ollama.index is not None and "11434/v1" in repr(ollama.index["embed"])


@pytest.mark.parametrize(
    ("store", "named"),
    [
        ("yes", "store must be a table"),
        ({"index": ["x"]}, "store.index must be a table"),
        ({"index": {"dims": 3}}, "store.index.embed must be"),
        ({"index": {"embed": "noseparator"}}, "store.index.embed must be"),
        ({"index": {"embed": "m:f", "dims": 0}}, "store.index.dims must be"),
        ({"index": {"embed": "m:f", "dims": "8"}}, "store.index.dims must be"),
        ({"index": {"embed": "m:f", "fields": "text"}}, "store.index.fields must be"),
        ({"index": {"embed": "m:f", "fields": [""]}}, "store.index.fields must be"),
        ({"ttl": 5}, "store.ttl must be a table"),
        ({"ttl": {"default_ttl": -1}}, "store.ttl.default_ttl must be"),
        ({"ttl": {"default_ttl": True}}, "store.ttl.default_ttl must be"),
        ({"ttl": {"sweep_interval_minutes": 0}}, "store.ttl.sweep_interval_minutes must be"),
        ({"ttl": {"refresh_on_read": "no"}}, "store.ttl.refresh_on_read must be"),
    ],
)
def test_a_malformed_store_table_is_a_usage_error_naming_the_key(
    tmp_path: Path, store: Any, named: str
) -> None:
    with pytest.raises(CliError, match=named.replace(".", r"\.")) as raised:
        _args(_config(tmp_path, store))
    assert raised.value.exit_code == 2


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--store-embed", "tests.serve.no_such_module:embed"], "no module named"),
        (["--store-embed", "tests.serve.store_targets:nothing"], "--store-embed: tests.serve"),
        (["--store-embed", "tests.serve.store_targets:_EMBED.dims"], "not an embedding function"),
        (["--store-embed", "openai:"], "names no model"),
        (["--store-dims", "4"], "need an embedder"),
        (["--store-embed", "tests.serve.store_targets:embed", "--store-dims", "0"], "at least 1"),
        (["--store-ttl", "0"], "--store-ttl 0: give minutes above 0"),
        (["--store-sweep", "-1"], "--store-sweep -1"),
    ],
)
def test_bad_options_are_usage_errors_naming_them(argv: list[str], named: str) -> None:
    with pytest.raises(CliError, match=named) as raised:
        store_settings(_args(TARGET, *argv))
    assert raised.value.exit_code == 2


def test_openai_without_a_key_says_which(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    config = _config(tmp_path, {"index": {"embed": "openai:text-embedding-3-small"}})
    with pytest.raises(CliError, match=r"store\.index\.embed: openai:.*OPENAI_API_KEY"):
        store_settings(_args(config))


def test_unknown_store_keys_are_named_as_ignored(tmp_path: Path) -> None:
    store = {"index": {"embed": "m:f", "ann": True}, "ttl": {"default_tll": 5}, "cache": {}}
    args = build_parser().parse_args(["serve", _config(tmp_path, store)])
    assert read_config(args.target[0]).ignored == [
        "store.index.ann",
        "store.ttl.default_tll",
        "store.cache",
    ]


def test_serve_refuses_a_bad_index_before_it_opens_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "serve.db"
    config = _config(tmp_path, {"index": {"embed": "./missing.py:embed"}})
    assert main(["serve", config, "--db", str(db)]) == 2
    assert "no such file" in capsys.readouterr().err
    assert not db.exists()


@pytest.fixture(params=["sqlite", "postgres"])
def configured(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """``graph-agent serve langgraph.json`` whose store has an index (the local embedder of
    ``store_targets``, by file path relative to the config) and a default TTL of 0.01 minute."""
    store = {
        "index": {"embed": f"{ROOT}/tests/serve/store_targets.py:embed", "dims": 32},
        "ttl": {"default_ttl": 0.01},
    }
    with ExitStack() as stack:
        if request.param == "postgres":
            where = {"postgres": stack.enter_context(fresh_schema())}
        else:
            where = {"db": str(tmp_path / "serve.db")}
        port = free_port()
        config = _config(tmp_path, store, port=port, **where)
        server = subprocess.Popen(
            [sys.executable, "-m", "graph_agent", "serve", config],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        stack.callback(server.wait, 15)
        stack.callback(server.terminate)
        url = f"http://127.0.0.1:{port}"
        wait_until_up(url)
        yield url


def test_a_configured_server_ranks_by_query_and_expires_by_default(configured: str) -> None:
    client = get_sync_client(url=configured)
    client.store.put_item(["docs"], key="tea", value={"text": "she likes green tea"}, ttl=60)
    client.store.put_item(["docs"], key="code", value={"text": "he writes rust code"}, ttl=60)
    client.store.put_item(["docs"], key="brief", value={"text": "green tea, briefly"})
    found = client.store.search_items(["docs"], query="green tea", limit=3)["items"]
    assert [item["key"] for item in found][:2] in (["tea", "brief"], ["brief", "tea"])
    assert found[0]["score"] > found[2]["score"]
    time.sleep(1.0)  # 0.01 minute is 0.6 s: the item put without a ttl is gone by now
    assert client.store.get_item(["docs"], key="brief") is None
    assert client.store.get_item(["docs"], key="tea") is not None
    # a run's node writes to the same store, under the same default TTL
    client.runs.wait(None, "notes", input={"user": "u", "text": "green tea notes"})
    assert client.store.search_items(["notes"], query="tea")["items"][0]["key"] == "last"


def test_over_http_a_put_without_ttl_takes_the_default_and_a_get_the_refresh_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The routes leave ``ttl`` and ``refresh_ttl`` to the store when the client gives none
    (the SDK sends neither unless asked); the store's clock is pinned to move time on."""

    now = [1_800_000_000.0]
    monkeypatch.setattr("graph_agent.store.base.now", lambda: now[0])
    store = InMemoryStore(default_ttl=1, refresh_on_read=False)
    with Server(tmp_path / "serve.db", [chain()], store=store) as served:
        client = get_sync_client(url=served.url)
        client.store.put_item(["n"], key="default", value={"v": 1})
        client.store.put_item(["n"], key="long", value={"v": 2}, ttl=10)
        now[0] += 50
        assert client.store.get_item(["n"], key="default") is not None  # not refreshed
        now[0] += 15
        assert client.store.get_item(["n"], key="default") is None  # 65 s > 1 minute
        assert client.store.get_item(["n"], key="long", refresh_ttl=True) is not None
        now[0] += 9 * 60 + 30  # 10.5 minutes after the put, 9.5 after the refreshing read
        assert client.store.get_item(["n"], key="long") is not None


def test_the_sweep_runs_on_the_servers_upkeep(tmp_path: Path) -> None:

    store = InMemoryStore()
    app = create_app([chain()], store=store)
    add_store_sweep(app.state.api, StoreSettings(sweep_minutes=2))
    (periodic,) = [job for job in app.state.api.periodic if job.name == "store-sweep"]
    assert periodic.every == 120
    store.put(("n",), "k", {}, ttl=0.0001)
    time.sleep(0.05)  # 0.006 s: expired by now
    asyncio.run(periodic.job())
    assert store._rows == {}  # swept: the row is gone, not only hidden
