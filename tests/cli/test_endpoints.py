"""Which real model the demo's flags mean, and how the header shows it."""

from __future__ import annotations

from graph_agent.cli.endpoints import online_model


def test_the_description_of_a_base_url_leaves_out_its_credentials():
    endpoint = online_model(
        {}, base_url="http://alice:hunter2@127.0.0.1:9/v1?key=hunter2", model="m"
    )

    assert endpoint.description == "m at http://127.0.0.1:9/v1"


def test_the_description_of_openai_base_url_leaves_out_its_credentials():
    environ = {"OPENAI_BASE_URL": "https://bob:s3cret@proxy.example/v1?token=s3cret"}

    endpoint = online_model(environ, model="m")

    assert endpoint.description == "m at https://proxy.example/v1"
