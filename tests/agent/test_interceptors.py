"""Model and tool interceptors: their order, editable requests, and the built-in ones."""

from __future__ import annotations

import time

import pytest

from graph_agent import NodeError, RunnableConfig, StreamingOutput, ToolContext, tool
from graph_agent.agent import (
    ModelFallbackInterceptor,
    ModelInterceptor,
    ModelRetryInterceptor,
    ReactAgent,
    ToolEmulatorInterceptor,
    ToolInterceptor,
    ToolRetryInterceptor,
)
from graph_agent.messages import (
    AssistantMessage,
    AssistantMessageChunk,
    SystemMessage,
    ToolCall,
    ToolResponseMessage,
    UserMessage,
)
from graph_agent.models import (
    ModelAuthenticationError,
    ModelBadRequestError,
    ModelConnectionError,
    ModelContextLengthError,
    ModelError,
    ModelNotFoundError,
    ModelRateLimitError,
    ModelResponseError,
    ModelServerError,
    ModelTimeoutError,
    ScriptedChatModel,
)


def calls(*items: tuple[str, str, dict]) -> AssistantMessage:
    """An assistant message asking for tools: calls(("c1", "add", {...}), ...)."""
    return AssistantMessage(tool_calls=[ToolCall(i, n, a) for i, n, a in items])


def results(state) -> dict[str, ToolResponseMessage]:
    return {m.tool_call_id: m for m in state["messages"] if isinstance(m, ToolResponseMessage)}


class Recording(ModelInterceptor):
    def __init__(self, label: str, log: list[str]) -> None:
        self.label = label
        self.log = log

    def intercept(self, request, call_next):
        self.log.append(f"{self.label}:in")
        reply = call_next(request)
        self.log.append(f"{self.label}:out")
        return reply


class RecordingTool(ToolInterceptor):
    def __init__(self, label: str, log: list[str]) -> None:
        self.label = label
        self.log = log

    def intercept(self, request, call_next):
        self.log.append(f"{self.label}:in")
        response = call_next(request)
        self.log.append(f"{self.label}:out")
        return response


class FlakyModel:
    """Fails the first ``failures`` calls with a ModelError, then answers ``answer``."""

    def __init__(self, failures: int, answer: str = "recovered") -> None:
        self.failures = failures
        self.answer = answer
        self.calls = 0

    def generate(self, messages, tools=None, options=None):
        self.calls += 1
        if self.calls <= self.failures:
            raise ModelError(f"overloaded (call {self.calls})", status_code=503)
        return AssistantMessage(self.answer)

    def stream(self, messages, tools=None, options=None):
        yield from ()
        raise NotImplementedError

    async def agenerate(self, messages, tools=None, options=None):
        return self.generate(messages, tools, options)

    async def astream(self, messages, tools=None, options=None):
        raise NotImplementedError
        yield


class BreaksMidStream:
    """Streams "Hello " in two chunks, then fails; ``generate`` would answer whole."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def generate(self, messages, tools=None, options=None):
        self.calls.append("generate")
        return AssistantMessage("whole answer")

    def stream(self, messages, tools=None, options=None):
        self.calls.append("stream")
        yield AssistantMessageChunk("Hel")
        yield AssistantMessageChunk("lo ")
        raise ModelError("connection reset mid-stream", status_code=None)

    async def agenerate(self, messages, tools=None, options=None):
        return self.generate(messages, tools, options)

    async def astream(self, messages, tools=None, options=None):
        for item in self.stream(messages, tools, options):
            yield item


class Counting:
    """Wraps a model and records which method each call used."""

    def __init__(self, model) -> None:
        self.model = model
        self.calls: list[str] = []

    def generate(self, messages, tools=None, options=None):
        self.calls.append("generate")
        return self.model.generate(messages, tools, options)

    def stream(self, messages, tools=None, options=None):
        self.calls.append("stream")
        return self.model.stream(messages, tools, options)

    async def agenerate(self, messages, tools=None, options=None):
        return self.generate(messages, tools, options)

    async def astream(self, messages, tools=None, options=None):
        for item in self.stream(messages, tools, options):
            yield item


def streamed_text(agent, config) -> tuple[str, BaseException | None]:
    """The chunks a streamed run showed, and the error it ended with (if any)."""
    shown: list[str] = []
    try:
        for output in agent.stream("hello", config):
            if isinstance(output, StreamingOutput):
                shown.append(output.chunk)
    except Exception as exc:
        return "".join(shown), exc
    return "".join(shown), None


def test_the_first_registered_model_interceptor_is_outermost():
    log: list[str] = []
    model = ScriptedChatModel(["hi"])
    agent = ReactAgent(
        "a", model, model_interceptors=[Recording("first", log), Recording("second", log)]
    )
    agent.call("hello")
    assert log == ["first:in", "second:in", "second:out", "first:out"]


def test_the_first_registered_tool_interceptor_is_outermost():
    log: list[str] = []

    @tool
    def ping() -> str:
        """Answer pong."""
        log.append("tool")
        return "pong"

    model = ScriptedChatModel([calls(("c1", "ping", {})), "done"])
    agent = ReactAgent(
        "a",
        model,
        tools=[ping],
        tool_interceptors=[RecordingTool("first", log), RecordingTool("second", log)],
    )
    agent.call("ping please")
    assert log == ["first:in", "second:in", "tool", "second:out", "first:out"]


def test_a_model_interceptor_that_edits_the_messages_changes_what_the_model_receives():
    class AddNote(ModelInterceptor):
        def intercept(self, request, call_next):
            request.messages.insert(0, SystemMessage("Answer in French."))
            return call_next(request)

    model = ScriptedChatModel(["Bonjour"])
    agent = ReactAgent("a", model, model_interceptors=[AddNote()])
    state = agent.invoke("hello", RunnableConfig(thread_id="t"))
    sent = model.requests[0].messages
    assert [type(m).__name__ for m in sent] == ["SystemMessage", "UserMessage"]
    assert sent[0].text == "Answer in French."
    # the edit shaped one request; it is not written into the conversation
    assert [type(m).__name__ for m in state["messages"]] == ["UserMessage", "AssistantMessage"]


def test_a_model_interceptor_that_edits_the_tools_changes_what_the_model_is_offered():
    @tool
    def safe() -> str:
        """A harmless tool."""
        return "ok"

    @tool
    def dangerous() -> str:
        """A tool the interceptor hides."""
        return "boom"

    class HideDangerous(ModelInterceptor):
        def intercept(self, request, call_next):
            request.tools = [t for t in request.tools if t.name != "dangerous"]
            return call_next(request)

    model = ScriptedChatModel(["fine"])
    agent = ReactAgent("a", model, tools=[safe, dangerous], model_interceptors=[HideDangerous()])
    agent.call("go")
    assert [t.name for t in model.requests[0].tools] == ["safe"]


def test_a_model_interceptor_that_edits_the_options_changes_what_the_model_receives():
    class Deterministic(ModelInterceptor):
        def intercept(self, request, call_next):
            request.options["temperature"] = 0
            return call_next(request)

    model = ScriptedChatModel(["ok"])
    agent = ReactAgent(
        "a", model, model_interceptors=[Deterministic()], model_options={"top_p": 0.5}
    )
    agent.call("go")
    assert model.requests[0].options == {"top_p": 0.5, "temperature": 0}


def test_a_model_interceptor_can_change_the_answer_that_is_stored():
    class Shout(ModelInterceptor):
        def intercept(self, request, call_next):
            reply = call_next(request)
            return reply.model_copy(update={"content": reply.text.upper()})

    agent = ReactAgent("a", ScriptedChatModel(["quiet"]), model_interceptors=[Shout()])
    assert agent.call("hello").text == "QUIET"


def test_a_tool_interceptor_that_edits_the_arguments_changes_what_the_tool_receives():
    received: list[dict] = []

    @tool
    def search(query: str, limit: int = 10) -> str:
        """Search."""
        received.append({"query": query, "limit": limit})
        return "found"

    class CapLimit(ToolInterceptor):
        def intercept(self, request, call_next):
            return call_next(request.with_arguments({**request.call.arguments, "limit": 3}))

    model = ScriptedChatModel([calls(("c1", "search", {"query": "cats", "limit": 50})), "ok"])
    agent = ReactAgent("a", model, tools=[search], tool_interceptors=[CapLimit()])
    state = agent.invoke("find cats", RunnableConfig(thread_id="t"))
    assert received == [{"query": "cats", "limit": 3}]
    assert results(state)["c1"].content == "found"


def test_a_tool_interceptor_can_repair_arguments_that_were_not_valid_json():
    received: list[dict] = []

    @tool
    def search(query: str, limit: int = 10) -> str:
        """Search."""
        received.append({"query": query, "limit": limit})
        return "found"

    class Repair(ToolInterceptor):
        def intercept(self, request, call_next):
            if request.call.has_malformed_arguments:
                request = request.with_arguments({"query": "cats"})
            return call_next(request)

    broken = ToolCall("c1", "search", {}, raw_arguments='{"query": "cats"')
    model = ScriptedChatModel([AssistantMessage(tool_calls=[broken]), "ok"])
    agent = ReactAgent("a", model, tools=[search], tool_interceptors=[Repair()])
    state = agent.invoke("find cats", RunnableConfig(thread_id="t"))
    assert received == [{"query": "cats", "limit": 10}]
    assert (results(state)["c1"].is_error, results(state)["c1"].content) == (False, "found")


def test_a_tool_interceptor_editing_arguments_in_place_leaves_the_history_alone():
    received: list[dict] = []

    @tool
    def greet(user: str) -> str:
        """Greet."""
        received.append({"user": user})
        return "hello"

    class Mask(ToolInterceptor):
        def intercept(self, request, call_next):
            request.call.arguments["user"] = "***"  # in place, not with_arguments()
            return call_next(request)

    call = ToolCall("c1", "greet", {"user": "ada"})
    model = ScriptedChatModel([AssistantMessage(tool_calls=[call]), "ok"])
    agent = ReactAgent("a", model, tools=[greet], tool_interceptors=[Mask()])
    config = RunnableConfig(thread_id="t")
    state = agent.invoke("hi", config)

    assert received == [{"user": "***"}]  # the tool got the edit
    for history in (state["messages"], agent.get_state(config).values["messages"]):
        assert history[1].tool_calls[0].arguments == {"user": "ada"}
    assert model.requests[1].messages[1].tool_calls[0].arguments == {"user": "ada"}


def test_model_retry_retries_a_failing_model_until_it_answers():
    model = ScriptedChatModel(
        [ModelError("overloaded", status_code=503), ModelError("again", status_code=503), "ok"]
    )
    agent = ReactAgent("a", model, model_interceptors=[ModelRetryInterceptor(2, backoff=0)])
    assert agent.call("hello").text == "ok"
    assert len(model.requests) == 3


def test_model_retry_gives_up_after_max_retries_with_a_node_error():
    model = FlakyModel(failures=10)
    agent = ReactAgent("a", model, model_interceptors=[ModelRetryInterceptor(2, backoff=0)])
    with pytest.raises(NodeError) as raised:
        agent.call("hello")
    assert raised.value.node == "__model__"
    assert isinstance(raised.value.__cause__, ModelError)
    assert model.calls == 3  # the first try and two retries


@pytest.mark.parametrize(
    "error",
    [
        ModelAuthenticationError("bad key", status_code=401),
        ModelNotFoundError("no such model", status_code=404),
        ModelBadRequestError("refused", status_code=400),
        ModelContextLengthError("too long", status_code=400),
        ModelError("refused by a custom model", status_code=422),
    ],
    ids=lambda error: type(error).__name__,
)
def test_model_retry_fails_at_once_on_an_error_another_attempt_cannot_cure(error):
    model = ScriptedChatModel([error, "never reached"])
    agent = ReactAgent("a", model, model_interceptors=[ModelRetryInterceptor(2, backoff=0)])
    with pytest.raises(NodeError) as raised:
        agent.call("hello")
    assert raised.value.__cause__ is error
    assert len(model.requests) == 1


@pytest.mark.parametrize(
    "error",
    [
        ModelConnectionError("connection reset"),
        ModelTimeoutError("read timeout"),
        ModelRateLimitError("slow down", status_code=429),
        ModelServerError("overloaded", status_code=503),
        ModelResponseError("not a completion"),
        ConnectionError("a custom model's own transport error"),
    ],
    ids=lambda error: type(error).__name__,
)
def test_model_retry_retries_transient_errors(error):
    model = ScriptedChatModel([error, "ok"])
    agent = ReactAgent("a", model, model_interceptors=[ModelRetryInterceptor(2, backoff=0)])
    assert agent.call("hello").text == "ok"
    assert len(model.requests) == 2


def test_model_retry_does_not_retry_a_rate_limit_asking_for_a_longer_wait_than_it_allows():
    error = ModelRateLimitError("quota", status_code=429, retry_after=600.0)
    model = ScriptedChatModel([error, "too soon"])
    retry = ModelRetryInterceptor(2, backoff=0, max_retry_after=120.0)
    agent = ReactAgent("a", model, model_interceptors=[retry])
    with pytest.raises(NodeError) as raised:
        agent.call("hello")
    assert raised.value.__cause__ is error
    assert len(model.requests) == 1
    assert any("asked to wait 600 s" in note and "120 s" in note for note in error.__notes__)


def test_model_retry_waits_at_least_as_long_as_a_rate_limit_asks():
    error = ModelRateLimitError("slow down", status_code=429, retry_after=0.2)
    model = ScriptedChatModel([error, "ok"])
    agent = ReactAgent("a", model, model_interceptors=[ModelRetryInterceptor(2, backoff=0)])
    started = time.monotonic()
    assert agent.call("hello").text == "ok"
    assert time.monotonic() - started >= 0.2
    assert len(model.requests) == 2


def test_model_retry_follows_its_own_rule_when_given_one():
    model = ScriptedChatModel([ModelBadRequestError("flaky proxy", status_code=400), "ok"])
    retry = ModelRetryInterceptor(2, backoff=0, retry_on=lambda error: error.status_code == 400)
    agent = ReactAgent("a", model, model_interceptors=[retry])
    assert agent.call("hello").text == "ok"


def test_model_retry_also_retries_a_streamed_model_call():
    model = ScriptedChatModel([ModelError("overloaded", status_code=503), "streamed answer"])
    agent = ReactAgent("a", model, model_interceptors=[ModelRetryInterceptor(1, backoff=0)])
    outputs = list(agent.stream("hello", RunnableConfig(thread_id="t")))
    chunks = "".join(o.chunk for o in outputs if isinstance(o, StreamingOutput))
    assert chunks == "streamed answer"
    assert agent.get_state(RunnableConfig(thread_id="t")).values["messages"][-1].text == chunks


def test_model_retry_never_retries_a_stream_that_already_showed_chunks():
    model = BreaksMidStream()
    agent = ReactAgent("a", model, model_interceptors=[ModelRetryInterceptor(2, backoff=0)])
    shown, error = streamed_text(agent, RunnableConfig(thread_id="t"))
    assert shown == "Hello "  # once: a retry would have shown the tokens again
    assert model.calls == ["stream"]
    assert isinstance(error, NodeError) and isinstance(error.__cause__, ModelError)
    assert any("did not retry" in note for note in error.__cause__.__notes__)


def test_model_retry_still_retries_a_stream_that_failed_before_its_first_chunk():
    model = ScriptedChatModel([ModelError("overloaded", status_code=503), "fine"])
    agent = ReactAgent("a", model, model_interceptors=[ModelRetryInterceptor(2, backoff=0)])
    assert streamed_text(agent, RunnableConfig(thread_id="t")) == ("fine", None)


def test_model_fallback_streams_the_fallback_answer_when_the_caller_streams():
    primary = ScriptedChatModel([ModelError("down", status_code=500)])
    fallback = Counting(ScriptedChatModel(["from the fallback"]))
    agent = ReactAgent("a", primary, model_interceptors=[ModelFallbackInterceptor(fallback)])
    config = RunnableConfig(thread_id="t")
    assert streamed_text(agent, config) == ("from the fallback", None)
    assert fallback.calls == ["stream"]
    assert agent.get_state(config).values["messages"][-1].text == "from the fallback"


def test_model_fallback_generates_when_the_failed_stream_already_showed_chunks():
    fallback = Counting(ScriptedChatModel(["from the fallback"]))
    agent = ReactAgent(
        "a", BreaksMidStream(), model_interceptors=[ModelFallbackInterceptor(fallback)]
    )
    config = RunnableConfig(thread_id="t")
    assert streamed_text(agent, config) == ("Hello ", None)
    assert fallback.calls == ["generate"]
    assert agent.get_state(config).values["messages"][-1].text == "from the fallback"


def test_model_fallback_generates_when_the_caller_does_not_stream():
    fallback = Counting(ScriptedChatModel(["from the fallback"]))
    agent = ReactAgent(
        "a", FlakyModel(failures=1), model_interceptors=[ModelFallbackInterceptor(fallback)]
    )
    assert agent.call("hello").text == "from the fallback"
    assert fallback.calls == ["generate"]


def test_model_fallback_asks_the_fallback_model_with_the_same_request():
    primary = ScriptedChatModel([ModelError("down", status_code=500)])
    fallback = ScriptedChatModel(["from the fallback"])
    agent = ReactAgent("a", primary, model_interceptors=[ModelFallbackInterceptor(fallback)])
    assert agent.call("hello").text == "from the fallback"
    assert [m.text for m in fallback.requests[0].messages] == ["hello"]


def test_model_fallback_tries_each_fallback_in_turn():
    primary = FlakyModel(failures=1)
    second = FlakyModel(failures=1)
    third = ScriptedChatModel(["third answers"])
    agent = ReactAgent("a", primary, model_interceptors=[ModelFallbackInterceptor(second, third)])
    assert agent.call("hello").text == "third answers"
    assert (primary.calls, second.calls, len(third.requests)) == (1, 1, 1)


def test_model_fallback_raises_a_node_error_when_every_model_fails():
    agent = ReactAgent(
        "a", FlakyModel(failures=5), model_interceptors=[ModelFallbackInterceptor(FlakyModel(5))]
    )
    with pytest.raises(NodeError) as raised:
        agent.call("hello")
    assert isinstance(raised.value.__cause__, ModelError)


def test_a_model_error_without_interceptors_is_a_node_error_not_assistant_text():
    agent = ReactAgent("a", FlakyModel(failures=1))
    config = RunnableConfig(thread_id="t")
    with pytest.raises(NodeError):
        agent.invoke("hello", config)
    messages = agent.get_state(config).values["messages"]
    assert [type(m).__name__ for m in messages] == ["UserMessage"]


def test_tool_retry_runs_a_flaky_tool_again_until_it_succeeds():
    attempts: list[int] = []

    @tool
    def flaky() -> str:
        """Fails twice, then works."""
        attempts.append(1)
        if len(attempts) < 3:
            raise ConnectionError("try again")
        return "worked"

    model = ScriptedChatModel([calls(("c1", "flaky", {})), "ok"])
    agent = ReactAgent("a", model, tools=[flaky], tool_interceptors=[ToolRetryInterceptor(2)])
    state = agent.invoke("go", RunnableConfig(thread_id="t"))
    assert len(attempts) == 3
    assert results(state)["c1"].content == "worked"
    assert not results(state)["c1"].is_error


def test_tool_retry_gives_up_and_the_model_sees_the_error():
    attempts: list[int] = []

    @tool
    def broken() -> str:
        """Always fails."""
        attempts.append(1)
        raise ConnectionError("unreachable")

    model = ScriptedChatModel([calls(("c1", "broken", {})), "sorry"])
    agent = ReactAgent("a", model, tools=[broken], tool_interceptors=[ToolRetryInterceptor(1)])
    state = agent.invoke("go", RunnableConfig(thread_id="t"))
    assert len(attempts) == 2
    result = results(state)["c1"]
    assert result.is_error and "unreachable" in result.content
    assert model.requests[1].messages[-1] == result


def test_tool_retry_after_a_timeout_runs_the_call_with_a_fresh_context_not_cancelled():
    seen: list[tuple[int, bool]] = []

    @tool(timeout=0.1)
    def fetch(ctx: ToolContext) -> str:
        """Slow on the first attempt: waits until the caller gives up on it."""
        seen.append((ctx.attempt, ctx.cancelled.is_set()))
        if ctx.attempt == 0:
            ctx.cancelled.wait(5)
            return "gave up"
        return "data"

    model = ScriptedChatModel([calls(("c1", "fetch", {})), "ok"])
    agent = ReactAgent("a", model, tools=[fetch], tool_interceptors=[ToolRetryInterceptor(2)])
    state = agent.invoke("go", RunnableConfig(thread_id="t"))
    assert seen == [(0, False), (1, False)]
    assert (results(state)["c1"].is_error, results(state)["c1"].content) == (False, "data")


def test_tool_retry_does_not_retry_bad_arguments_or_an_unknown_tool():
    attempts: list[int] = []

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    class Count(ToolInterceptor):
        def intercept(self, request, call_next):
            attempts.append(1)
            return call_next(request)

    model = ScriptedChatModel(
        [calls(("c1", "add", {"a": "one", "b": 2}), ("c2", "nope", {})), "sorry"]
    )
    agent = ReactAgent(
        "a", model, tools=[add], tool_interceptors=[ToolRetryInterceptor(3), Count()]
    )
    state = agent.invoke("go", RunnableConfig(thread_id="t"))
    assert len(attempts) == 2  # one attempt per call
    assert "Invalid arguments for tool 'add'" in results(state)["c1"].content
    assert "there is no tool named 'nope'" in results(state)["c2"].content


def test_tool_emulator_answers_without_running_the_tool():
    ran: list[str] = []

    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        ran.append(to)
        return "sent"

    emulator = ToolEmulatorInterceptor(
        lambda request: f"pretend sent to {request.call.arguments['to']}"
    )
    model = ScriptedChatModel([calls(("c1", "send_email", {"to": "bob"})), "done"])
    agent = ReactAgent("a", model, tools=[send_email], tool_interceptors=[emulator])
    state = agent.invoke("mail bob", RunnableConfig(thread_id="t"))
    assert ran == []
    assert results(state)["c1"].content == "pretend sent to bob"
    assert results(state)["c1"].name == "send_email"


def test_tool_emulator_lets_the_real_tool_run_when_the_function_returns_none():
    @tool
    def echo(text: str) -> str:
        """Repeat the text."""
        return text

    emulator = ToolEmulatorInterceptor(lambda request: None)
    model = ScriptedChatModel([calls(("c1", "echo", {"text": "real"})), "done"])
    agent = ReactAgent("a", model, tools=[echo], tool_interceptors=[emulator])
    assert results(agent.invoke("go", RunnableConfig(thread_id="t")))["c1"].content == "real"


def test_tool_emulator_limited_to_some_tools_runs_the_others():
    @tool
    def echo(text: str) -> str:
        """Repeat the text."""
        return text

    @tool
    def launch() -> str:
        """Launch the rocket."""
        raise AssertionError("the emulated tool must not run")

    emulator = ToolEmulatorInterceptor(lambda request: {"launched": False}, tools=["launch"])
    model = ScriptedChatModel([calls(("c1", "echo", {"text": "hi"}), ("c2", "launch", {})), "done"])
    agent = ReactAgent("a", model, tools=[echo, launch], tool_interceptors=[emulator])
    answers = results(agent.invoke("go", RunnableConfig(thread_id="t")))
    assert answers["c1"].content == "hi"
    assert answers["c2"].content == '{"launched":false}'


def test_a_tool_interceptor_sees_the_call_the_state_and_the_run_context():
    seen: list[tuple] = []

    @tool
    def ping() -> str:
        """Answer pong."""
        return "pong"

    class Spy(ToolInterceptor):
        def intercept(self, request, call_next):
            last_user = [m for m in request.state["messages"] if isinstance(m, UserMessage)][-1]
            seen.append(
                (request.call.id, request.tool.name, last_user.text, request.config.context)
            )
            return call_next(request)

    model = ScriptedChatModel([calls(("c1", "ping", {})), "done"])
    agent = ReactAgent("a", model, tools=[ping], tool_interceptors=[Spy()])
    agent.invoke("ping it", RunnableConfig(thread_id="t", context={"user": "ann"}))
    assert seen == [("c1", "ping", "ping it", {"user": "ann"})]


def test_a_tool_interceptor_that_returns_no_tool_response_fails_the_run_naming_it():
    @tool
    def ping() -> str:
        """Answer pong."""
        return "pong"

    class Sloppy(ToolInterceptor):
        def intercept(self, request, call_next):
            return call_next(request).content  # a str, not a ToolResponseMessage

    model = ScriptedChatModel([calls(("c1", "ping", {})), "done"])
    agent = ReactAgent("a", model, tools=[ping], tool_interceptors=[Sloppy()])
    with pytest.raises(NodeError, match="must return a ToolResponseMessage") as raised:
        agent.invoke("ping", RunnableConfig(thread_id="t"))
    assert raised.value.node == "__tool__"


def test_a_model_interceptor_that_returns_no_assistant_message_fails_the_run_naming_it():
    class Sloppy(ModelInterceptor):
        def intercept(self, request, call_next):
            return call_next(request).text

    agent = ReactAgent("a", ScriptedChatModel(["hi"]), model_interceptors=[Sloppy()])
    with pytest.raises(NodeError, match="must return an AssistantMessage"):
        agent.invoke("hello", RunnableConfig(thread_id="t"))
