"""Which real model the demo's flags mean, and how the header shows it."""

from __future__ import annotations

import pytest

from graph_agent.cli.endpoints import online_model
from graph_agent.cli.errors import CliError


def test_the_description_of_a_base_url_leaves_out_its_credentials():
    endpoint = online_model(
        {}, base_url="http://alice:hunter2@127.0.0.1:9/v1?key=hunter2", model="m"
    )

    assert endpoint.description == "m at http://127.0.0.1:9/v1"


def test_the_description_of_openai_base_url_leaves_out_its_credentials():
    environ = {"OPENAI_BASE_URL": "https://bob:s3cret@proxy.example/v1?token=s3cret"}

    endpoint = online_model(environ, model="m")

    assert endpoint.description == "m at https://proxy.example/v1"


def test_provider_anthropic_gives_the_messages_client_with_the_anthropic_key():
    from graph_agent.models import AnthropicChatModel

    environ = {"ANTHROPIC_API_KEY": "sk-ant-test-0000", "OPENAI_API_KEY": "sk-openai"}

    endpoint = online_model(environ, provider="anthropic")

    assert isinstance(endpoint.model, AnthropicChatModel)
    assert endpoint.description == "claude-sonnet-4-5 at https://api.anthropic.com"
    assert endpoint.model._api_key.get_secret_value() == "sk-ant-test-0000"


def test_the_anthropic_key_is_not_sent_to_another_base_url():
    environ = {"ANTHROPIC_API_KEY": "sk-ant-test-0000"}

    endpoint = online_model(environ, provider="anthropic", base_url="http://127.0.0.1:9", model="m")

    assert endpoint.description == "m at http://127.0.0.1:9"
    assert endpoint.model._api_key.get_secret_value() == ""


def test_an_anthropic_key_alone_is_the_last_choice_of_online():
    from graph_agent.models import AnthropicChatModel

    only_anthropic = online_model({"ANTHROPIC_API_KEY": "sk-ant-test-0000"})
    both = online_model({"ANTHROPIC_API_KEY": "k", "DASHSCOPE_API_KEY": "d"})

    assert isinstance(only_anthropic.model, AnthropicChatModel)
    assert both.description == "qwen-plus on DashScope"


def test_provider_anthropic_without_a_key_for_anthropic_is_a_usage_error():
    with pytest.raises(CliError, match="ANTHROPIC_API_KEY is not set"):
        online_model({}, provider="anthropic")
