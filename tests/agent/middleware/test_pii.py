"""PIIRedactionInterceptor: what reaches the model (a scripted one and a real local HTTP
server) holds no PII in redact and block modes; each strategy and direction."""

from __future__ import annotations

import json

import pytest

from graph_agent import NodeError, RunnableConfig, tool
from graph_agent.agent import ReactAgent
from graph_agent.agent.middleware import PIIDetectedError, PIIRedactionInterceptor, luhn_valid
from graph_agent.messages import AssistantMessage, ToolCall
from graph_agent.models import ScriptedChatModel
from tests.models.openai_fake_server import (
    Behaviour,
    completion,
    reply_json,
    tool_call,
)

CFG = RunnableConfig(thread_id="t1")
EMAIL = "ada.lovelace@example.com"
CARD = "4111 1111 1111 1111"
PHONE = "+1 555-123-4567"
SECRETS = (EMAIL, CARD, "4111111111111111", "555-123-4567")
MESSAGE = f"Mail {EMAIL}, card {CARD}, phone {PHONE}."


@tool
def lookup_customer(name: str) -> str:
    """Look up a customer."""
    return f"{name}: {EMAIL}, {PHONE}"


def asks_for_lookup() -> Behaviour:
    calls = [tool_call("c1", "lookup_customer", {"name": "Ada"})]
    return reply_json(completion(None, tool_calls=calls, finish_reason="tool_calls"))


def sent_text(model: ScriptedChatModel) -> str:
    return "\n".join(m.text for request in model.requests for m in request.messages)


def run(pii: PIIRedactionInterceptor, replies: list, message: str = MESSAGE) -> ScriptedChatModel:
    model = ScriptedChatModel(replies)
    agent = ReactAgent("agent", model, tools=[lookup_customer], model_interceptors=[pii])
    agent.invoke(message, CFG)
    return model


def test_redact_replaces_each_kind_in_user_messages():
    model = run(PIIRedactionInterceptor(strategy="redact"), ["ok"])
    assert model.requests[0].messages[-1].text == (
        "Mail [REDACTED_EMAIL], card [REDACTED_CREDIT_CARD], phone [REDACTED_PHONE]."
    )


def test_mask_keeps_the_end_of_each_value():
    model = run(PIIRedactionInterceptor(strategy="mask"), ["ok"])
    assert model.requests[0].messages[-1].text == (
        "Mail a***@example.com, card ****-****-****-1111, phone ***-***-4567."
    )


def test_hash_gives_equal_values_equal_tokens():
    model = run(PIIRedactionInterceptor(["email"], strategy="hash"), ["ok"], f"{EMAIL} {EMAIL}")
    first, second = model.requests[0].messages[-1].text.split()
    assert first == second and first.startswith("[EMAIL:") and EMAIL not in first


def test_numbers_that_fail_the_luhn_check_are_left_alone():
    text = "order 4111 1111 1111 1112 shipped"
    model = run(PIIRedactionInterceptor(["credit_card"]), ["ok"], text)
    assert model.requests[0].messages[-1].text == text
    assert luhn_valid("4111111111111111") and not luhn_valid("4111111111111112")


def test_custom_patterns_have_their_own_names():
    pii = PIIRedactionInterceptor([], patterns={"employee_id": r"EMP-\d{4}"})
    model = run(pii, ["ok"], "ask EMP-0042 and ada@example.com")
    assert model.requests[0].messages[-1].text == "ask [REDACTED_EMPLOYEE_ID] and ada@example.com"


def test_tool_results_are_checked_only_when_asked():
    replies = [AssistantMessage(tool_calls=[ToolCall("c1", "lookup_customer", {"name": "Ada"})])]
    plain = run(PIIRedactionInterceptor(), [*replies, "ok"], "who is Ada?")
    assert EMAIL in plain.requests[1].messages[-1].text
    checked = run(PIIRedactionInterceptor(apply_to_tool_results=True), [*replies, "ok"], "who?")
    assert checked.requests[1].messages[-1].text == "Ada: [REDACTED_EMAIL], [REDACTED_PHONE]"


def test_the_answer_is_redacted_before_it_is_stored_when_asked():
    model = ScriptedChatModel([f"Write to {EMAIL}."])
    pii = PIIRedactionInterceptor(apply_to_input=False, apply_to_output=True)
    agent = ReactAgent("agent", model, model_interceptors=[pii])
    assert agent.call("whom should I write to?", CFG).text == "Write to [REDACTED_EMAIL]."
    assert EMAIL not in json.dumps([m.text for m in agent.get_state(CFG).values["messages"]])


def test_the_history_keeps_the_users_words():
    model = ScriptedChatModel(["ok"])
    agent = ReactAgent("agent", model, model_interceptors=[PIIRedactionInterceptor()])
    agent.invoke(MESSAGE, CFG)
    assert agent.get_state(CFG).values["messages"][0].text == MESSAGE
    assert EMAIL not in sent_text(model)


def test_block_raises_before_the_model_is_called_without_naming_the_value():
    model = ScriptedChatModel(["never"])
    agent = ReactAgent(
        "agent", model, model_interceptors=[PIIRedactionInterceptor(strategy="block")]
    )
    with pytest.raises(NodeError) as caught:
        agent.invoke(f"my mail is {EMAIL}", CFG)
    error = caught.value.__cause__
    assert isinstance(error, PIIDetectedError)
    assert (error.pii_type, error.direction) == ("email", "input")
    assert "an email address was found in a user message" in str(error)
    assert EMAIL not in str(error) and EMAIL not in str(caught.value)
    assert model.requests == []


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="unknown PII types \\['ssn'\\]"):
        PIIRedactionInterceptor(["ssn"])
    with pytest.raises(ValueError, match="strategy must be"):
        PIIRedactionInterceptor(strategy="shred")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not a valid regular expression"):
        PIIRedactionInterceptor(patterns={"bad": "("})
    with pytest.raises(ValueError, match="is a built-in type's"):
        PIIRedactionInterceptor(patterns={"email": "x"})


def test_in_redact_mode_no_pii_reaches_the_model_server(server, model):
    server.enqueue(
        asks_for_lookup(),
        reply_json(completion("Done.")),
    )
    pii = PIIRedactionInterceptor(apply_to_tool_results=True)
    agent = ReactAgent("agent", model, tools=[lookup_customer], model_interceptors=[pii])
    assert agent.call(MESSAGE, CFG).text == "Done."
    bodies = json.dumps(server.bodies)
    assert len(server.bodies) == 2
    assert "[REDACTED_EMAIL]" in bodies and "[REDACTED_PHONE]" in bodies
    for secret in SECRETS:
        assert secret not in bodies


def test_in_block_mode_nothing_reaches_the_model_server(server, model):
    server.enqueue(reply_json(completion("should not be asked")))
    pii = PIIRedactionInterceptor(strategy="block")
    agent = ReactAgent("agent", model, model_interceptors=[pii])
    with pytest.raises(NodeError) as caught:
        agent.invoke(f"call me on {PHONE}", CFG)
    assert isinstance(caught.value.__cause__, PIIDetectedError)
    assert server.requests == []


def test_in_block_mode_a_tool_result_with_pii_stops_the_run_before_the_next_request(server, model):
    server.enqueue(
        asks_for_lookup(),
        reply_json(completion("should not be asked")),
    )
    pii = PIIRedactionInterceptor(strategy="block", apply_to_tool_results=True)
    agent = ReactAgent("agent", model, tools=[lookup_customer], model_interceptors=[pii])
    with pytest.raises(NodeError) as caught:
        agent.invoke("who is Ada?", CFG)
    assert caught.value.__cause__.direction == "tool_result"
    assert len(server.bodies) == 1
    assert EMAIL not in json.dumps(server.bodies)


def test_a_steered_message_is_checked_like_the_input():
    model = ScriptedChatModel(["ok"])
    agent = ReactAgent("agent", model, model_interceptors=[PIIRedactionInterceptor()])
    agent.steer(CFG, f"also cc {EMAIL}")
    agent.invoke("hello", CFG)
    assert model.requests[0].messages[-1].text == "also cc [REDACTED_EMAIL]"
