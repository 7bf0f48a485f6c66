"""Which webhook URLs the server calls (``--webhook-allow``): hosts listed by name, wildcard, address
or network; internal addresses only when listed; nothing by default."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from graph_agent.cli.serve_config import read_config
from graph_agent.serve.webhooks_policy import DeliveryRefused, WebhookPolicy, redacted


def test_nothing_is_allowed_by_default_and_the_refusal_names_the_option() -> None:
    problem = WebhookPolicy(()).problem("https://hooks.example.com/x")
    assert problem is not None and "--webhook-allow" in problem


def test_names_wildcards_addresses_and_networks_are_matched() -> None:
    policy = WebhookPolicy(["hooks.example.com,*.corp.example", "10.0.0.0/8", "::1"])
    assert policy.problem("https://hooks.example.com:8443/done") is None
    assert policy.problem("https://a.b.corp.example/x") is None
    assert policy.problem("http://10.1.2.3/x") is None
    assert policy.problem("http://[::1]:9000/x") is None
    refused = policy.problem("https://evil.example.com/x")
    assert refused is not None and "'evil.example.com'" in refused and "--webhook-allow" in refused
    assert policy.problem("http://169.254.169.254/") is not None
    assert policy.problem("ftp://hooks.example.com/") is not None
    assert policy.problem("https:///nohost") is not None
    assert policy.problem(42) == "webhook must be a URL string"


@pytest.mark.parametrize("entry", ["http://x.example", "a/b", "", "*.", "x y"])
def test_an_entry_that_is_no_host_is_refused(entry: str) -> None:
    if not entry.strip():
        assert not WebhookPolicy([entry]).enabled
        return
    with pytest.raises(ValueError, match="--webhook-allow"):
        WebhookPolicy([entry])


def test_a_wildcard_never_reaches_an_internal_address() -> None:
    anything = WebhookPolicy(["*"])
    assert anything.problem("http://localhost:8000/hook") is None  # a name: allowed by *
    with pytest.raises(DeliveryRefused, match="internal address"):
        asyncio.run(anything.target("http://localhost:8000/hook"))  # but it is loopback


def test_a_name_listed_exactly_may_be_internal_and_plain_http_is_pinned() -> None:
    policy = WebhookPolicy(["localhost"])
    target = asyncio.run(policy.target("http://localhost:8000/hook?x=1"))
    assert target.host_header == "localhost:8000"
    assert target.url.endswith(":8000/hook?x=1") and "localhost" not in target.url


def test_logs_never_show_credentials_or_query_strings() -> None:
    assert redacted("https://u:p@h.example/a?token=1#f") == "https://h.example/a"


def test_the_config_file_lists_webhook_hosts_as_langgraph_json_does(tmp_path: Path) -> None:
    file = tmp_path / "graph_agent.json"
    file.write_text(
        json.dumps(
            {
                "graphs": {"chain": "./graphs.py:chain"},
                "webhook_allow": ["a.example"],
                "webhooks": {"url": {"allowed_domains": ["b.example"], "require_https": True}},
            }
        )
    )
    config = read_config(str(file))
    assert config.options["webhook_allow"] == ["a.example", "b.example"]
    assert "webhooks.url.require_https" in config.ignored
