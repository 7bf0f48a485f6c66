"""Embeddings for a store's semantic search: the index configuration, a deterministic local
embedder (hashed bag of words) and a client of an OpenAI-compatible ``/embeddings`` endpoint.

An embedder is any callable taking a list of texts and returning one vector (a sequence of
floats) per text. A store keeps each vector scaled to unit length, so cosine similarity is a
dot product.

Example:
    >>> from graph_agent.store import InMemoryStore, HashEmbeddings
    >>> store = InMemoryStore(index={"embed": HashEmbeddings(), "fields": ["text"]})
    >>> store.put(("notes",), "a", {"text": "the user likes green tea"})
    >>> store.put(("notes",), "b", {"text": "the meeting moved to Friday"})
    >>> store.search(("notes",), query="which tea does the user like?", limit=1)[0].key
    'a'
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from graph_agent.graph.errors import GraphAgentError
from graph_agent.store.errors import EmbeddingError, StoreInputError

__all__ = [
    "EmbeddingError",
    "HashEmbeddings",
    "IndexConfig",
    "OpenAIEmbeddings",
    "check_dims",
    "index_config",
    "texts_at",
    "unit",
]

Embed = Callable[[list[str]], Sequence[Sequence[float]]]


@dataclass(frozen=True, kw_only=True, slots=True)
class IndexConfig:
    """A store's ``index``: how items are embedded.

    ``fields`` are paths into a value (``"text"``, ``"profile.bio"``; ``"$"``: the whole
    value as JSON), each embedded as a text of its own. ``dims``, when given, is the length
    every vector must have (checked at each put and query, see :func:`check_dims`).
    """

    embed: Embed
    fields: tuple[str, ...] = ("$",)
    dims: int | None = None

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        """Unit vectors of ``texts``, checked to be one per text, all of one length."""
        try:
            vectors = self.embed(texts)
        except GraphAgentError:
            raise
        except Exception as exc:
            raise EmbeddingError(
                f"the store's embedder failed: {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(vectors, Sequence) or len(vectors) != len(texts):
            raise EmbeddingError(
                f"the store's embedder returned {_count(vectors)} for {len(texts)} texts; it must "
                "return one vector (a list of floats) per text, in order"
            )
        result = [unit(vector) for vector in vectors]
        if len({len(vector) for vector in result}) > 1:
            raise EmbeddingError("the store's embedder returned vectors of different lengths")
        return result


def _count(vectors: object) -> str:
    return f"{len(vectors)} vectors" if isinstance(vectors, Sequence) else type(vectors).__name__


def index_config(index: Mapping[str, Any]) -> IndexConfig:
    """``index={"embed": fn, "fields": [...]}`` checked, as an :class:`IndexConfig`."""
    if isinstance(index, IndexConfig):
        return index
    if not isinstance(index, Mapping) or not callable(index.get("embed")):
        raise _index_error(f"index={index!r:.80}")
    unknown = set(index) - {"embed", "fields", "dims"}
    if unknown:
        raise _index_error(f"index has the unknown key(s) {', '.join(sorted(map(str, unknown)))}")
    fields = index.get("fields", ("$",))
    if isinstance(fields, str) or not fields or not all(isinstance(f, str) and f for f in fields):
        raise _index_error(f"index['fields']={fields!r}")
    dims = index.get("dims")
    if dims is not None and (type(dims) is not int or dims < 1):
        raise StoreInputError(
            f"index['dims']={dims!r}: give the length of the embedder's vectors (an int >= 1), "
            "or leave 'dims' out"
        )
    return IndexConfig(embed=index["embed"], fields=tuple(fields), dims=dims)


def check_dims(index: IndexConfig, vector: Sequence[float], source: Callable[[], str]) -> None:
    """Raise :class:`StoreInputError` when ``index`` fixes ``dims`` and ``vector``, the
    embedding of ``source()`` (e.g. ``"the query 'tea'"``), has another length: such a vector
    would be compared with vectors of another embedder, giving scores that mean nothing."""
    if index.dims is None or len(vector) == index.dims:
        return
    raise StoreInputError(
        f"the store's index has dims={index.dims}, and its embedder returned {len(vector)} "
        f"numbers for {source()}: give index['dims']={len(vector)} if that embedder is the one "
        f"the items were put with, else an embedder of {index.dims} dimensions"
    )


def _index_error(what: str) -> GraphAgentError:
    return StoreInputError(
        f"{what}: a store's index is {{'embed': fn(texts) -> vectors, 'fields': ['text']}}, e.g. "
        "index={'embed': HashEmbeddings(), 'fields': ['text']}"
    )


def texts_at(value: Mapping[str, Any], fields: Sequence[str]) -> Iterator[tuple[str, str]]:
    """``(path, text)`` for each field path found in ``value``; a string is its own text,
    anything else its JSON. A path the value lacks is skipped."""
    for path in fields:
        if path == "$":
            yield path, json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
            continue
        found: Any = value
        for part in path.split("."):
            if not isinstance(found, Mapping) or part not in found:
                break
            found = found[part]
        else:
            if found is None:
                continue
            text = (
                found
                if isinstance(found, str)
                else json.dumps(found, ensure_ascii=False, default=str)
            )
            yield path, text


def unit(vector: Sequence[float]) -> list[float]:
    """``vector`` scaled to length 1 (a zero vector stays zero)."""
    try:
        floats = [float(x) for x in vector]
    except (TypeError, ValueError) as exc:
        raise EmbeddingError(
            f"the store's embedder returned a vector that is not numbers: {exc}"
        ) from exc
    norm = math.sqrt(math.fsum(x * x for x in floats))
    if not math.isfinite(norm):
        raise EmbeddingError("the store's embedder returned a vector with an infinite or NaN value")
    return [x / norm for x in floats] if norm else floats


_WORD = re.compile(r"\w+")


class HashEmbeddings:
    """A deterministic local embedder: a hashed bag of words.

    Each word (lower-cased) adds ±1 at a position picked by its BLAKE2 hash, so texts sharing
    words point the same way. Same text, same vector, in every process; no model, no network.
    It finds shared words, not meaning: good for tests, demos and keyword-like recall.

    Args:
        dims: The vectors' length.
    """

    def __init__(self, dims: int = 256) -> None:
        if type(dims) is not int or dims < 1:
            raise ValueError(f"HashEmbeddings(dims={dims!r}): give a length of at least 1")
        self.dims = dims

    def __repr__(self) -> str:
        return f"HashEmbeddings(dims={self.dims})"

    def __call__(self, texts: list[str]) -> list[list[float]]:
        return [self._embed(text) for text in texts]

    def _embed(self, text: str) -> list[float]:
        vector = [0.0] * self.dims
        for word in _WORD.findall(text.lower()):
            digest = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")
            vector[digest % self.dims] += 1.0 if digest >> 63 else -1.0
        return vector


class OpenAIEmbeddings:
    """Vectors from an OpenAI-compatible ``POST {base_url}/embeddings`` (OpenAI, vLLM,
    llama.cpp, Ollama, ...), over httpx.

    Args:
        model: The embedding model's name.
        base_url: The API root, e.g. ``"https://api.openai.com/v1"``.
        api_key: Sent as a bearer token (never shown in errors).
        dimensions: Ask the model for vectors of this length (models that support it).
        timeout: Seconds one request may take.
        batch_size: Most texts per request.
    """

    def __init__(
        self,
        model: str,
        base_url: str = "https://api.openai.com/v1",
        *,
        api_key: str | None = None,
        dimensions: int | None = None,
        timeout: float = 60.0,
        batch_size: int = 512,
    ) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.dimensions = dimensions
        self.batch_size = batch_size
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(timeout=timeout, headers=headers)

    def __repr__(self) -> str:
        return f"OpenAIEmbeddings(model={self.model!r}, base_url={self.base_url!r})"

    def close(self) -> None:
        self._client.close()

    def __call__(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            vectors.extend(self._request(texts[start : start + self.batch_size]))
        return vectors

    def _request(self, texts: list[str]) -> list[list[float]]:
        body: dict[str, Any] = {"model": self.model, "input": texts}
        if self.dimensions is not None:
            body["dimensions"] = self.dimensions
        url = f"{self.base_url}/embeddings"
        try:
            response = self._client.post(url, json=body)
        except httpx.HTTPError as exc:
            raise EmbeddingError(f"cannot reach {url}: {type(exc).__name__}: {exc}") from exc
        if response.status_code != 200:
            raise EmbeddingError(
                f"{url} answered {response.status_code}: {_error_message(response)}"
            )
        try:
            data = response.json()["data"]
            ordered = sorted(data, key=lambda entry: entry["index"])
            vectors = [[float(x) for x in entry["embedding"]] for entry in ordered]
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddingError(
                f"{url} answered 200 but not with embeddings ({{'data': [{{'index', "
                f"'embedding'}}]}}): {exc!r:.120}"
            ) from exc
        if len(vectors) != len(texts):
            raise EmbeddingError(f"{url} returned {len(vectors)} embeddings for {len(texts)} texts")
        return vectors


def _error_message(response: httpx.Response) -> str:
    try:
        error = response.json().get("error")
        message = error.get("message") if isinstance(error, dict) else error
    except (ValueError, AttributeError):
        message = None
    return str(message or response.text[:200] or response.reason_phrase)
