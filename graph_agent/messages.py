"""Chat messages: frozen pydantic models shared by models, tools, agents and checkpoints.

A conversation is a list of :data:`Message` values. Every message has an ``id`` (a fresh uuid
when omitted, so two constructions never share one); an append-strategy state key uses it to
replace a message in place (same id), delete one (:class:`RemoveMessage`) or swap the whole list
(:class:`ReplaceAll`).

Example:
    >>> from graph_agent.messages import AssistantMessage, ToolCall, UserMessage
    >>> question = UserMessage("What is 1 + 2?")
    >>> question.content == question.text == "What is 1 + 2?"
    True
    >>> reply = AssistantMessage(tool_calls=[ToolCall("c1", "add", {"a": 1, "b": 2})])
    >>> reply.tool_calls[0].arguments
    {'a': 1, 'b': 2}
    >>> question.id != UserMessage("What is 1 + 2?").id
    True
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Annotated, Any, ClassVar, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator, model_validator

from graph_agent.checkpoint.serde import register
from graph_agent.graph.state import RemoveMessage, ReplaceAll

__all__ = [
    "AnyMessage",
    "AssistantMessage",
    "AssistantMessageChunk",
    "AudioPart",
    "BaseMessage",
    "ContentPart",
    "FilePart",
    "ImagePart",
    "Message",
    "MessageContent",
    "RemoveMessage",
    "ReplaceAll",
    "SystemMessage",
    "TextPart",
    "ThinkingBlock",
    "ToolCall",
    "ToolCallDelta",
    "ToolResponseMessage",
    "Usage",
    "UserMessage",
    "content_text",
    "message_from_dict",
    "new_message_id",
]


_IDS_PER_BATCH = 128
_BATCH_BYTES = 16 * _IDS_PER_BATCH
# per 16 random bytes: clear the version nibble and the variant bits, then mark version 4 and
# the RFC 4122 variant, for the whole batch in one integer operation
_UUID4_KEEP = int.from_bytes(bytes.fromhex("ffffffffffff0fff3fffffffffffffff" * _IDS_PER_BATCH))
_UUID4_MARK = int.from_bytes(bytes.fromhex("00000000000040008000000000000000" * _IDS_PER_BATCH))
_id_batch: Iterator[str] = iter(())


def _next_batch() -> Iterator[str]:
    """Fresh uuid4 hex ids from one ``os.urandom`` call, marked and turned into hex as one
    integer: a syscall, or a format() call, per id was a third of the cost of making a
    message."""
    global _id_batch
    marked = int.from_bytes(os.urandom(_BATCH_BYTES)) & _UUID4_KEEP | _UUID4_MARK
    text = marked.to_bytes(_BATCH_BYTES).hex()
    _id_batch = iter([text[i : i + 32] for i in range(0, len(text), 32)])
    return _id_batch


def _forget_batch() -> None:
    global _id_batch
    _id_batch = iter(())


# A forked child must not hand out the ids its parent has left in the batch.
os.register_at_fork(after_in_child=_forget_batch)


def new_message_id() -> str:
    """Return a fresh message id (a uuid4 in hex). A module function so tests can pin it."""
    # next() on a list iterator is atomic: threads share the batch, never an id
    fresh = next(_id_batch, None)
    return fresh if fresh is not None else next(_next_batch())


def _fresh_id() -> str:
    # Looks new_message_id up at call time, so monkeypatching the module function works.
    return new_message_id()


def _validate(model: BaseModel, fields: dict[str, Any]) -> None:
    """What ``BaseModel.__init__(**fields)`` does, without passing the fields as keywords
    twice: messages are made on every model and tool step."""
    model.__pydantic_validator__.validate_python(fields, self_instance=model)


_FROZEN = ConfigDict(frozen=True, extra="forbid")


class Usage(BaseModel):
    """Token counts of one model call. ``a + b`` adds them up, e.g. for a run's total.

    The first three are the totals every provider reports. The others break them down where the
    provider says (0 when it does not): of ``prompt_tokens``, those read from its prompt cache
    (``cache_read_tokens``), written to it (``cache_creation_tokens``) and spent on audio
    (``prompt_audio_tokens``); of ``completion_tokens``, those spent reasoning
    (``reasoning_tokens``) and on audio (``completion_audio_tokens``). LangGraph's clients read
    them as LangChain's ``input_token_details`` and ``output_token_details``.

    Example:
        >>> Usage(prompt_tokens=3, completion_tokens=2, total_tokens=5) + Usage(prompt_tokens=1)
        Usage(prompt_tokens=4, completion_tokens=2, total_tokens=5)
        >>> Usage(prompt_tokens=100, cache_read_tokens=90).cache_read_tokens
        90
    """

    model_config = _FROZEN

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    reasoning_tokens: int = 0
    prompt_audio_tokens: int = 0
    completion_audio_tokens: int = 0
    # Checkpoints leave the breakdown out while 0: a usage without one is stored as before.
    __graph_agent_omit_empty__: ClassVar[tuple[str, ...]] = (
        "cache_read_tokens",
        "cache_creation_tokens",
        "reasoning_tokens",
        "prompt_audio_tokens",
        "completion_audio_tokens",
    )

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        mine, theirs = self.__dict__, other.__dict__
        return Usage(**{name: mine[name] + theirs[name] for name in mine})

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        """The three totals, and the breakdown only where it is not 0."""
        omitted = self.__graph_agent_omit_empty__
        for name, value in self.__dict__.items():
            if value or name not in omitted:
                yield name, value


_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_MEDIA_TYPE = re.compile(r"[\w.+-]+/[\w.+-]+")
_DATA_URL = re.compile(r"data:(?P<media_type>[^;,]*)(?:;[^;,]*)*;base64,(?P<data>.*)", re.DOTALL)
_EXAMPLE_MEDIA_TYPES = {"image": "image/png", "audio": "audio/wav"}
_AUDIO_FORMATS = {"mpeg": "mp3", "mp3": "mp3", "x-wav": "wav", "wave": "wav", "wav": "wav"}


def _checked_data(kind: str, data: str, media_type: str | None, family: str | None) -> None:
    """Raise ValueError unless ``data`` is base64 text with a fitting ``media_type``."""
    if len(data) % 4 or not _BASE64.fullmatch(data):
        raise ValueError(
            f"{kind}.data must be base64 text (A-Z, a-z, 0-9, +, /, '=' padding, no line "
            "breaks); encode the bytes with base64.b64encode(raw).decode()"
        )
    if media_type is None:
        example = _EXAMPLE_MEDIA_TYPES.get(family or "", "application/pdf")
        raise ValueError(
            f"{kind}.data needs a media_type, e.g. {kind}(data=..., media_type={example!r})"
        )
    _checked_media_type(kind, media_type, family)


def _checked_media_type(kind: str, media_type: str, family: str | None) -> None:
    if not _MEDIA_TYPE.fullmatch(media_type):
        raise ValueError(f"{kind}.media_type {media_type!r} is not a media type like 'image/png'")
    if family is not None and not media_type.startswith(f"{family}/"):
        raise ValueError(f"{kind}.media_type must be {family}/..., got {media_type!r}")


def _split_data_url(fields: Any) -> Any:
    """``url="data:<media type>;base64,<data>"`` given as ``media_type`` and ``data``."""
    if not isinstance(fields, dict):
        return fields
    url = fields.get("url")
    if not isinstance(url, str) or not url.startswith("data:"):
        return fields
    match = _DATA_URL.fullmatch(url)
    if match is None:
        raise ValueError("a data: URL must read data:<media type>;base64,<base64 data>")
    fields = {**fields, "url": None, "data": match["data"]}
    fields.setdefault("media_type", match["media_type"] or None)
    return fields


def _byte_size(data: str) -> int:
    return len(data) * 3 // 4 - (len(data) - len(data.rstrip("=")))


def _size_text(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{round(size / 1024)} KB"
    return f"{size / (1024 * 1024):.1f} MB"


class TextPart(BaseModel):
    """Text inside a message whose content is a list of parts. ``TextPart("hi")`` is
    ``TextPart(text="hi")``.

    Example:
        >>> UserMessage([TextPart("What is "), TextPart("this?")]).text
        'What is this?'
    """

    model_config = _FROZEN

    type: Literal["text"] = "text"
    text: str

    def __init__(self, text: str = "", **fields: Any) -> None:
        fields["text"] = text
        _validate(self, fields)


class ImagePart(BaseModel):
    """An image for a vision model: by ``url``, or as base64 ``data`` with its ``media_type``.

    A ``data:<media type>;base64,<data>`` URL given as ``url`` is split into ``data`` and
    ``media_type``. ``detail`` (``"auto"``, ``"low"``, ``"high"``) is OpenAI's resolution hint,
    sent only when set.

    Example:
        >>> ImagePart(url="https://example.com/cat.png").placeholder
        '[image: https://example.com/cat.png]'
        >>> ImagePart(data="iVBORw0KGgo=", media_type="image/png").placeholder
        '[image: image/png, 8 B]'
    """

    model_config = _FROZEN

    type: Literal["image"] = "image"
    url: str | None = None
    data: str | None = None
    media_type: str | None = None
    detail: Literal["auto", "low", "high"] | None = None

    _from_data_url = model_validator(mode="before")(_split_data_url)

    @model_validator(mode="after")
    def _check(self) -> ImagePart:
        if (self.url is None) == (self.data is None):
            raise ValueError(
                "ImagePart needs either url=... (an http(s) URL) or data=... (base64) with "
                "media_type=..., not both and not neither"
            )
        if self.data is not None:
            _checked_data("ImagePart", self.data, self.media_type, "image")
        elif self.media_type is not None:
            _checked_media_type("ImagePart", self.media_type, "image")
        return self

    @property
    def placeholder(self) -> str:
        """How a transcript shows the image: ``[image: image/png, 12 KB]`` or its URL."""
        if self.data is None:
            return f"[image: {self.url}]"
        return f"[image: {self.media_type}, {_size_text(_byte_size(self.data))}]"


class AudioPart(BaseModel):
    """Audio for a model that listens: base64 ``data`` and its ``media_type`` (``audio/wav``,
    ``audio/mpeg``, ...); :attr:`format` is the short name OpenAI's ``input_audio`` wants.

    Example:
        >>> AudioPart(data="UklGRg==", media_type="audio/wav").format
        'wav'
    """

    model_config = _FROZEN

    type: Literal["audio"] = "audio"
    data: str
    media_type: str

    def __init__(self, data: str = "", media_type: str = "", **fields: Any) -> None:
        fields["data"] = data
        fields["media_type"] = media_type
        _validate(self, fields)

    @model_validator(mode="after")
    def _check(self) -> AudioPart:
        _checked_data("AudioPart", self.data, self.media_type or None, "audio")
        return self

    @property
    def format(self) -> str:
        """The audio format by its short name: ``wav``, ``mp3``, else the media subtype."""
        subtype = self.media_type.partition("/")[2]
        return _AUDIO_FORMATS.get(subtype, subtype)

    @property
    def placeholder(self) -> str:
        """How a transcript shows the audio: ``[audio: audio/wav, 40 KB]``."""
        return f"[audio: {self.media_type}, {_size_text(_byte_size(self.data))}]"


class FilePart(BaseModel):
    """A document (a PDF, ...): base64 ``data`` with its ``media_type``, a ``url``, or the
    ``file_id`` of a file uploaded to the provider; ``filename`` names it to the model.

    The OpenAI chat format carries ``data`` and ``file_id``, not ``url``.

    Example:
        >>> FilePart(data="JVBERi0=", media_type="application/pdf", filename="a.pdf").placeholder
        '[file: a.pdf, application/pdf, 5 B]'
    """

    model_config = _FROZEN

    type: Literal["file"] = "file"
    data: str | None = None
    media_type: str | None = None
    url: str | None = None
    file_id: str | None = None
    filename: str | None = None

    _from_data_url = model_validator(mode="before")(_split_data_url)

    @model_validator(mode="after")
    def _check(self) -> FilePart:
        given = [name for name in ("data", "url", "file_id") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(
                "FilePart needs exactly one of data=... (base64, with media_type=...), url=... "
                f"or file_id=...; got {', '.join(given) or 'none'}"
            )
        if self.data is not None:
            _checked_data("FilePart", self.data, self.media_type, None)
        elif self.media_type is not None:
            _checked_media_type("FilePart", self.media_type, None)
        return self

    @property
    def placeholder(self) -> str:
        """How a transcript shows the file: ``[file: a.pdf, application/pdf, 3 KB]``."""
        facts = [self.filename, self.media_type]
        if self.data is not None:
            facts.append(_size_text(_byte_size(self.data)))
        else:
            facts.append(self.url or f"id {self.file_id}")
        return f"[file: {', '.join(fact for fact in facts if fact)}]"


ContentPart: TypeAlias = Annotated[
    TextPart | ImagePart | AudioPart | FilePart, Field(discriminator="type")
]
"""One part of a message's content, tagged by ``type``."""

MessageContent: TypeAlias = str | list[ContentPart]
"""What a user, assistant or tool message holds: plain text, or a list of parts."""


def content_text(content: MessageContent, *, placeholders: bool = False) -> str:
    """The text of a message's content: the text parts joined; with ``placeholders``, each
    image, audio or file part shown as its placeholder (how transcripts and the CLI show it).

    Example:
        >>> parts = [TextPart("Look:"), ImagePart(url="https://x.test/a.png")]
        >>> content_text(parts), content_text(parts, placeholders=True)
        ('Look:', 'Look: [image: https://x.test/a.png]')
    """
    if isinstance(content, str):
        return content
    if not placeholders:
        return "".join(part.text for part in content if isinstance(part, TextPart))
    pieces = [part.text if isinstance(part, TextPart) else part.placeholder for part in content]
    return " ".join(piece for piece in pieces if piece)


class ToolCall(BaseModel):
    """One tool call requested by the model.

    ``arguments`` is the decoded JSON object. When the model sent arguments that are not a JSON
    object, ``arguments`` is ``{}`` and ``raw_arguments`` keeps the text as received
    (:attr:`has_malformed_arguments` is then true); the tool node answers such a call with an
    error result instead of running the tool.

    Example:
        >>> ToolCall("c1", "get_weather", {"city": "Paris"}).arguments["city"]
        'Paris'
    """

    model_config = _FROZEN

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    raw_arguments: str | None = None
    raw_id: str | None = None
    """The id the model sent, when it was missing or a duplicate and the agent replaced it."""

    def __init__(
        self,
        id: str,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        raw_arguments: str | None = None,
        **fields: Any,
    ) -> None:
        fields["id"] = id
        fields["name"] = name
        if arguments is not None:  # validation copies it (any mapping) into a new dict
            fields["arguments"] = arguments
        if raw_arguments is not None:
            fields["raw_arguments"] = raw_arguments
        _validate(self, fields)

    @property
    def has_malformed_arguments(self) -> bool:
        """True when the model's arguments were not a JSON object (see ``raw_arguments``)."""
        return self.raw_arguments is not None


class ThinkingBlock(BaseModel):
    """One block of a model's thinking as the provider sent it, kept to be sent back unchanged.

    Anthropic's extended thinking answers with ``thinking`` blocks (the text and a
    ``signature`` over it) and ``redacted_thinking`` blocks (encrypted ``data`` only). With
    tool use, the next request must carry the blocks of the turn exactly as received, so an
    :class:`AssistantMessage` keeps them in ``thinking_blocks`` (their text is also its
    ``reasoning``), through checkpoints too.

    Example:
        >>> ThinkingBlock(thinking="2 + 2 is 4.", signature="sig").type
        'thinking'
    """

    model_config = _FROZEN

    type: Literal["thinking", "redacted_thinking"] = "thinking"
    thinking: str = ""
    signature: str = ""
    data: str = ""
    """The encrypted thinking of a ``redacted_thinking`` block."""


class BaseMessage(BaseModel):
    """The common base of the four message classes; build those, not this."""

    model_config = _FROZEN

    id: str = Field(default_factory=_fresh_id)
    content: MessageContent = ""

    @property
    def text(self) -> str:
        """The message text: ``content`` itself when it is a string, else its text parts
        joined (see :func:`content_text`)."""
        content = self.content
        return content if type(content) is str else content_text(content)


class SystemMessage(BaseMessage):
    """Instructions for the model. ``SystemMessage("Be brief.")`` is ``content="Be brief."``."""

    role: Literal["system"] = "system"
    content: str = ""

    def __init__(self, content: str = "", *, id: str | None = None, **fields: Any) -> None:
        fields["content"] = content
        if id is not None:
            fields["id"] = id
        _validate(self, fields)


class UserMessage(BaseMessage):
    """What the user said. ``UserMessage("hi")`` is ``UserMessage(content="hi")``; the content
    may also be a list of parts, to send images, audio or files.

    Example:
        >>> question = UserMessage([TextPart("What is this?"), ImagePart(url="https://x.test/a.png")])
        >>> question.text
        'What is this?'
    """

    role: Literal["user"] = "user"

    def __init__(
        self,
        content: str | Sequence[TextPart | ImagePart | AudioPart | FilePart] = "",
        *,
        id: str | None = None,
        **fields: Any,
    ) -> None:
        fields["content"] = content
        if id is not None:
            fields["id"] = id
        _validate(self, fields)


class AssistantMessage(BaseMessage):
    """The model's answer: text, tool calls, or both.

    Attributes:
        content: The answer text (``""`` when the model only called tools), or a list of parts;
            ``.text`` is the text either way.
        tool_calls: Tools the model wants run, in the order it listed them.
        finish_reason: Why the model stopped (``"stop"``, ``"tool_calls"``, ``"length"``, ...).
        usage: Token counts of the call that produced this message, when known.
        reasoning: The model's separate reasoning text (``reasoning_content``), when it sent one.
        thinking_blocks: The provider's thinking blocks, signed or encrypted, to be sent back
            with the conversation (Anthropic); empty for the other models.

    Example:
        >>> AssistantMessage("Sunny.", finish_reason="stop").text
        'Sunny.'
    """

    role: Literal["assistant"] = "assistant"
    tool_calls: list[ToolCall] = Field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage | None = None
    reasoning: str | None = None
    thinking_blocks: list[ThinkingBlock] = Field(default_factory=list)
    # Checkpoints leave it out while empty: an answer without thinking is stored as before.
    __graph_agent_omit_empty__: ClassVar[tuple[str, ...]] = ("thinking_blocks",)

    def __init__(
        self,
        content: str | Sequence[TextPart | ImagePart | AudioPart | FilePart] | None = "",
        *,
        id: str | None = None,
        tool_calls: Sequence[ToolCall] | None = None,
        finish_reason: str | None = None,
        usage: Usage | None = None,
        reasoning: str | None = None,
        thinking_blocks: Sequence[ThinkingBlock] | None = None,
        **fields: Any,
    ) -> None:
        fields["content"] = content
        if id is not None:
            fields["id"] = id
        if tool_calls is not None:
            fields["tool_calls"] = tool_calls
        if finish_reason is not None:
            fields["finish_reason"] = finish_reason
        if usage is not None:
            fields["usage"] = usage
        if reasoning is not None:
            fields["reasoning"] = reasoning
        if thinking_blocks:
            fields["thinking_blocks"] = thinking_blocks
        _validate(self, fields)

    @field_validator("content", mode="before")
    @classmethod
    def _null_content_is_empty(cls, value: Any) -> Any:
        return "" if value is None else value

    @field_validator("tool_calls", mode="before")
    @classmethod
    def _null_tool_calls_is_empty(cls, value: Any) -> Any:
        return [] if value is None else value


class ToolResponseMessage(BaseMessage):
    """The result of one tool call, matched to it by ``tool_call_id``. Its content is text, or
    a list of parts when the tool returned images, audio or files.

    Example:
        >>> ToolResponseMessage(tool_call_id="c1", name="add", content="3").is_error
        False
    """

    role: Literal["tool"] = "tool"
    tool_call_id: str
    name: str = ""
    is_error: bool = False


class ToolCallDelta(BaseModel):
    """A piece of a streamed tool call. Pieces with the same ``index`` belong to one call.

    ``id`` and ``name`` usually come with the first piece only (some servers repeat them on
    every piece); ``arguments`` is a fragment of the JSON text, to be concatenated.
    """

    model_config = _FROZEN

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


class AssistantMessageChunk(BaseModel):
    """One streamed piece of an :class:`AssistantMessage`.

    ``content`` (also ``.text``) is the new text only, so a UI can print chunks as they come;
    ``reasoning`` likewise. ``thinking_blocks`` are whole blocks, each given once it has ended.
    All chunks of one answer share the ``id`` of the message they build;
    :func:`graph_agent.models.fold_chunks` turns them into that message.

    Example:
        >>> chunk = AssistantMessageChunk("Hel")
        >>> print(chunk.text, end="")
        Hel
    """

    model_config = _FROZEN

    id: str = Field(default_factory=_fresh_id)
    content: str = ""
    reasoning: str = ""
    tool_call_deltas: list[ToolCallDelta] = Field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage | None = None
    thinking_blocks: list[ThinkingBlock] = Field(default_factory=list)
    __graph_agent_omit_empty__: ClassVar[tuple[str, ...]] = ("thinking_blocks",)

    def __init__(
        self,
        content: str = "",
        *,
        id: str | None = None,
        reasoning: str = "",
        tool_call_deltas: Sequence[ToolCallDelta] | None = None,
        finish_reason: str | None = None,
        usage: Usage | None = None,
        thinking_blocks: Sequence[ThinkingBlock] | None = None,
        **fields: Any,
    ) -> None:
        fields["content"] = content
        fields["reasoning"] = reasoning
        if id is not None:
            fields["id"] = id
        if tool_call_deltas is not None:
            fields["tool_call_deltas"] = tool_call_deltas
        if finish_reason is not None:
            fields["finish_reason"] = finish_reason
        if usage is not None:
            fields["usage"] = usage
        if thinking_blocks:
            fields["thinking_blocks"] = thinking_blocks
        _validate(self, fields)

    @property
    def text(self) -> str:
        """The new text of this chunk; an alias of ``content``."""
        return self.content


Message: TypeAlias = SystemMessage | UserMessage | AssistantMessage | ToolResponseMessage
"""Any message of a conversation."""

AnyMessage: TypeAlias = Annotated[Message, Field(discriminator="role")]
""":data:`Message` tagged by ``role``, for pydantic fields and :class:`TypeAdapter` parsing."""

_MESSAGE_ADAPTER: TypeAdapter[Message] = TypeAdapter(AnyMessage)


def message_from_dict(data: dict[str, Any]) -> Message:
    """Rebuild a message from ``message.model_dump()`` output, choosing the class by ``role``.

    Example:
        >>> message_from_dict(UserMessage("hi", id="m1").model_dump())
        UserMessage(id='m1', content='hi', role='user')
    """
    return _MESSAGE_ADAPTER.validate_python(data)


register(SystemMessage, 16)
register(UserMessage, 17)
register(AssistantMessage, 18)
register(ToolResponseMessage, 19)
register(ToolCall, 20)
register(AssistantMessageChunk, 21)
register(Usage, 22)
register(ToolCallDelta, 23)
register(TextPart, 24)
register(ImagePart, 25)
register(AudioPart, 26)
register(FilePart, 27)
register(ThinkingBlock, 28)
