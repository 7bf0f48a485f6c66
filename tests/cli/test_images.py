"""Pictures from the command line: ``demo --image PATH`` and ``/image PATH`` in ``chat`` send
an image part to the model, and the terminal shows it as a placeholder."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.media import PNG, PNG_BYTES
from tests.models.openai_fake_server import FakeOpenAIServer, completion, reply_json

SEEING_AGENT = """
from graph_agent.agent import ReactAgent
from graph_agent.messages import content_text
from graph_agent.models import ScriptedChatModel


def describe(request):
    return "I got: " + content_text(request.messages[-1].content, placeholders=True)


agent = ReactAgent("eyes", ScriptedChatModel([describe] * 5))
"""


@pytest.fixture
def photo(tmp_path: Path) -> Path:
    path = tmp_path / "photo.png"
    path.write_bytes(PNG_BYTES)
    return path


@pytest.fixture
def seeing_agent(tmp_path: Path) -> str:
    module = tmp_path / "seeing_agent.py"
    module.write_text(SEEING_AGENT)
    return f"{module}:agent"


def test_demo_image_reaches_the_model_in_the_openai_shape_and_shows_as_a_placeholder(
    cli, photo: Path
) -> None:
    with FakeOpenAIServer() as server:
        server.enqueue(reply_json(completion("A black square.")))
        result = cli(
            "demo", "--plain", "--base-url", server.base_url, "--model", "m",
            "--image", str(photo), "What is this?",
        )  # fmt: skip
        bodies = server.bodies

    assert result.code == 0, result.err
    assert "you: What is this? [image: image/png, 12 KB]" in result.out
    assert "A black square." in result.out
    assert bodies[0]["messages"][-1] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        ],
    }


def test_demo_image_without_a_question_asks_what_is_in_the_picture(cli, photo: Path) -> None:
    result = cli("demo", "--plain", "--image", str(photo))
    assert result.code == 0, result.err
    assert "you: What is in this picture? [image: image/png, 12 KB]" in result.out


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("missing.png", "image missing.png does not exist"),
        ("notes.txt", "notes.txt is not an image file this command can send"),
    ],
)
def test_demo_image_of_a_missing_or_unsupported_file_is_a_clear_usage_error(
    cli, tmp_path: Path, name: str, says: str
) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    result = cli("demo", "--plain", "--image", name)
    assert result.code == 2
    assert says in result.err
    assert "you:" not in result.out  # refused before any run


def test_chat_image_with_a_message_sends_both_in_one_turn(cli, photo: Path, seeing_agent) -> None:
    result = cli("chat", "--plain", seeing_agent, stdin=f"/image {photo} What is this?\n/exit\n")
    assert result.code == 0, result.err
    assert "I got: What is this? [image: image/png, 12 KB]" in result.out


def test_chat_image_alone_goes_with_the_next_message(cli, photo: Path, seeing_agent) -> None:
    stdin = f"/image {photo}\nAnd this?\nNo picture now\n/exit\n"
    result = cli("chat", "--plain", seeing_agent, stdin=stdin)
    assert result.code == 0, result.err
    assert "attached [image: image/png, 12 KB]: it goes with your next message" in result.out
    assert "I got: And this? [image: image/png, 12 KB]" in result.out
    assert "I got: No picture now" in result.out


def test_chat_image_of_a_missing_file_is_an_error_and_the_chat_goes_on(cli, seeing_agent) -> None:
    result = cli("chat", "--plain", seeing_agent, stdin="/image nope.png\nhello\n/exit\n")
    assert result.code == 0, result.err
    assert "image nope.png does not exist" in result.err
    assert "I got: hello" in result.out
