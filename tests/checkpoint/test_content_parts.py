"""Messages with images, audio and files survive checkpoints: an agent's thread holding them
loads exactly from every saver, also in a new process's saver (memory, SQLite, PostgreSQL)."""

from __future__ import annotations

from graph_agent import RunnableConfig, tool
from graph_agent.agent import ReactAgent
from graph_agent.checkpoint.base import CheckpointSaver
from graph_agent.graph.saver import Blob
from graph_agent.messages import (
    AssistantMessage,
    AudioPart,
    FilePart,
    ImagePart,
    TextPart,
    ToolCall,
    ToolResponseMessage,
    UserMessage,
)
from graph_agent.models import ScriptedChatModel
from tests.checkpoint.test_conformance import checkpoint
from tests.media import PDF, PNG, WAV

SCREENSHOT = ImagePart(data=PNG, media_type="image/png")


@tool
def screenshot() -> ImagePart:
    """A picture of the screen."""
    return SCREENSHOT


def test_every_part_round_trips_through_the_saver(saver: CheckpointSaver, reopen) -> None:
    messages = [
        UserMessage(
            [
                TextPart("Look and listen"),
                SCREENSHOT,
                ImagePart(url="https://x.test/a.png", detail="high"),
                AudioPart(WAV, "audio/wav"),
                FilePart(data=PDF, media_type="application/pdf", filename="a.pdf"),
                FilePart(file_id="file-1"),
            ]
        ),
        AssistantMessage([TextPart("Seen.")]),
    ]
    saver.put(checkpoint(blobs={"messages": Blob("full", messages)}))
    loaded = reopen().get("t1").values["messages"]
    assert loaded == messages
    assert [type(p) for p in loaded[0].content] == [
        TextPart,
        ImagePart,
        ImagePart,
        AudioPart,
        FilePart,
        FilePart,
    ]


def test_an_agent_thread_with_an_image_question_and_an_image_tool_result_reloads_exactly(
    saver: CheckpointSaver, reopen
) -> None:
    model = ScriptedChatModel(
        [AssistantMessage(tool_calls=[ToolCall("c1", "screenshot", {})]), "A login page."]
    )
    config = RunnableConfig(thread_id="pictures")
    question = UserMessage([TextPart("What is on my screen?"), SCREENSHOT])
    ReactAgent("eyes", model, tools=[screenshot], saver=saver).invoke(question, config)

    again = ReactAgent("eyes", ScriptedChatModel([]), tools=[screenshot], saver=reopen())
    messages = list(again.get_state(config).values["messages"])
    assert messages[0] == question
    result = messages[2]
    assert isinstance(result, ToolResponseMessage) and result.content == [SCREENSHOT]
    assert messages[-1].text == "A login page."
    # the model saw both pictures: the question's and the tool's
    second_request = model.requests[1].messages
    assert second_request[0].content == question.content
    assert second_request[2].content == [SCREENSHOT]
