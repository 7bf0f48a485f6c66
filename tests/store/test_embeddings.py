"""Embedders: the local hashed bag of words, and the OpenAI-compatible /embeddings client
against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from graph_agent.store import EmbeddingError, HashEmbeddings, InMemoryStore, OpenAIEmbeddings
from graph_agent.store.embeddings import index_config, texts_at

API_KEY = "sk-test-embeddings-SECRET-77"


def test_the_hashed_bag_of_words_is_deterministic_and_shares_words():
    embed = HashEmbeddings(64)
    tea, tea_again, coffee = embed(["Green TEA", "green tea", "black coffee"])
    assert tea == tea_again
    assert len(tea) == 64
    assert sum(abs(x) for x in tea) == 2  # two words, one ±1 each
    assert tea != coffee
    assert embed([""]) == [[0.0] * 64]


def test_fields_are_read_by_dotted_paths_and_dollar_is_the_whole_value():
    value = {"text": "hi", "profile": {"bio": "likes tea", "age": 40}, "none": None}
    assert list(texts_at(value, ["text", "profile.bio", "profile.age", "missing", "none"])) == [
        ("text", "hi"),
        ("profile.bio", "likes tea"),
        ("profile.age", "40"),
    ]
    [(path, whole)] = texts_at({"b": 1, "a": "x"}, ["$"])
    assert (path, json.loads(whole)) == ("$", {"a": "x", "b": 1})


@pytest.mark.parametrize(
    "index",
    [
        {"fields": ["text"]},
        {"embed": "not callable"},
        {"embed": len, "fields": "text"},
        {"embed": len, "other": 1},
    ],
)
def test_a_malformed_index_is_refused_with_its_shape(index):
    with pytest.raises(ValueError, match="'embed': fn"):
        index_config(index)


def test_an_embedder_returning_the_wrong_number_of_vectors_is_an_embedding_error():
    store = InMemoryStore(index={"embed": lambda texts: [[1.0]], "fields": ["a", "b"]})
    with pytest.raises(EmbeddingError, match="returned 1 vectors for 2 texts"):
        store.put(("n",), "k", {"a": "x", "b": "y"})
    assert store.get(("n",), "k") is None


def test_an_embedder_that_raises_is_an_embedding_error():
    def broken(texts: list[str]) -> list[list[float]]:
        raise ConnectionError("model server down")

    store = InMemoryStore(index={"embed": broken})
    with pytest.raises(EmbeddingError, match="model server down"):
        store.put(("n",), "k", {"a": "x"})


class _EmbeddingServer:
    """Answers POST /v1/embeddings like OpenAI: a vector per input, listed in reverse order
    (clients must sort by ``index``); records each request."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.status = 200
        self.reply: Any = None
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "body": body}
                )
                if server.reply is not None:
                    payload = server.reply
                else:
                    data = [
                        {
                            "object": "embedding",
                            "index": i,
                            "embedding": [float(len(t)), float(i), 1.0],
                        }
                        for i, t in enumerate(body["input"])
                    ]
                    payload = {
                        "object": "list",
                        "data": list(reversed(data)),
                        "model": body["model"],
                    }
                raw = json.dumps(payload).encode()
                self.send_response(server.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[_EmbeddingServer]:
    running = _EmbeddingServer()
    yield running
    running.close()


def test_the_openai_client_posts_texts_and_returns_vectors_in_input_order(server):
    embed = OpenAIEmbeddings("text-embedding-3-small", server.url, api_key=API_KEY, dimensions=3)
    vectors = embed(["a", "bbb", "cc"])
    assert vectors == [[1.0, 0.0, 1.0], [3.0, 1.0, 1.0], [2.0, 2.0, 1.0]]
    [request] = server.requests
    assert request["path"] == "/v1/embeddings"
    assert request["body"] == {
        "model": "text-embedding-3-small",
        "input": ["a", "bbb", "cc"],
        "dimensions": 3,
    }
    assert request["headers"]["Authorization"] == f"Bearer {API_KEY}"
    embed.close()


def test_the_openai_client_splits_many_texts_into_batches(server):
    embed = OpenAIEmbeddings("m", server.url, batch_size=2)
    assert len(embed(["a", "b", "c", "d", "e"])) == 5
    assert [len(r["body"]["input"]) for r in server.requests] == [2, 2, 1]
    assert "Authorization" not in server.requests[0]["headers"]


def test_a_store_ranks_with_the_openai_client_as_its_embedder(server):
    store = InMemoryStore(index={"embed": OpenAIEmbeddings("m", server.url), "fields": ["text"]})
    store.put(("n",), "short", {"text": "ab"})
    store.put(("n",), "long", {"text": "abcdefghijkl"})
    assert store.search(("n",), query="abcdefghij")[0].key == "long"


def test_an_error_status_is_an_embedding_error_with_the_server_message_and_no_key(server):
    server.status = 401
    server.reply = {"error": {"message": "Incorrect API key provided"}}
    embed = OpenAIEmbeddings("m", server.url, api_key=API_KEY)
    with pytest.raises(EmbeddingError, match="answered 401: Incorrect API key") as raised:
        embed(["a"])
    assert API_KEY not in str(raised.value)


def test_an_answer_without_embeddings_is_an_embedding_error(server):
    server.reply = {"object": "list", "data": [{"index": 0}]}
    with pytest.raises(EmbeddingError, match="not with embeddings"):
        OpenAIEmbeddings("m", server.url)(["a"])


def test_an_unreachable_server_is_an_embedding_error():
    with pytest.raises(EmbeddingError, match="cannot reach"):
        OpenAIEmbeddings("m", "http://127.0.0.1:1/v1", timeout=2)(["a"])
