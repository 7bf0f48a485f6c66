"""A team of agents: two researchers work at the same time, then a writer turns their notes into
a report (a SequentialAgent over a ParallelAgent), streamed with the path of every step.

The models are scripted, so it runs offline; with real models only the ``ScriptedChatModel``
lines change.

Run: python examples/team.py
Draw it with every agent open: graph-agent draw examples/team.py:team.graph --xray
"""

from __future__ import annotations

from graph_agent import (
    AssistantMessage,
    NodeOutput,
    ParallelAgent,
    ReactAgent,
    SequentialAgent,
    StreamingOutput,
    ToolCall,
    ToolResponseMessage,
    tool,
)
from graph_agent.models import ModelRequest, ScriptedChatModel

ARTICLES = {
    "graph runtimes": "Graph runtimes checkpoint every step, so a crashed agent resumes.",
}


@tool
def search_web(query: str) -> str:
    """Search the web.

    Args:
        query: What to look for.
    """
    return ARTICLES.get(query.lower(), "nothing found")


def web_researcher(request: ModelRequest) -> AssistantMessage | str:
    """Searches once, then reports what it found."""
    last = request.messages[-1]
    if isinstance(last, ToolResponseMessage):
        return f"From the web: {last.text}"
    return AssistantMessage(tool_calls=[ToolCall("s1", "search_web", {"query": last.text})])


def librarian(request: ModelRequest) -> str:
    return "From the papers: BSP supersteps (Valiant, 1990) make parallel steps deterministic."


def writer_model(request: ModelRequest) -> str:
    """Writes the report from the research notes in the conversation."""
    notes = [m.text for m in request.messages if isinstance(m, AssistantMessage) and m.text]
    return "Report: " + " ".join(note.split(": ", 1)[1] for note in notes)


web = ReactAgent(
    "web",
    ScriptedChatModel([web_researcher] * 20),
    tools=[search_web],
    description="Searches the web.",
)
papers = ReactAgent("papers", ScriptedChatModel([librarian] * 20), description="Knows the papers.")
research = ParallelAgent("research", [web, papers], description="Researches from two sources.")
writer = ReactAgent(
    "writer",
    ScriptedChatModel([writer_model] * 20),
    instruction="Write a short report from the research notes.",
)
team = SequentialAgent("report_team", [research, writer])


def describe(output: NodeOutput) -> list[str]:
    """A line per message a finished node added, saying where it ran (``output.path``: the
    nodes of the outer graphs it ran inside) and for which agent or team."""
    added = output.update.get("messages") if output.node != "__start__" else None
    messages = added if isinstance(added, list) else [added]
    where = "/".join((*output.path, output.node))
    lines = []
    for message in messages:
        if isinstance(message, AssistantMessage) and message.tool_calls:
            call = message.tool_calls[0]
            what = f"calls {call.name}({call.arguments})"
        elif isinstance(message, ToolResponseMessage):
            what = f"{message.name} -> {message.text}"
        elif isinstance(message, AssistantMessage):
            what = message.text
        else:
            continue  # the input, an instruction put first
        lines.append(f"{'  ' * len(output.path)}[{output.agent}] {where}: {what}")
    return lines


if __name__ == "__main__":
    streamed_by: set[str] = set()
    final = None
    for output in team.stream("graph runtimes", subgraphs=True):
        if isinstance(output, StreamingOutput):
            streamed_by.add(output.agent)  # tokens as the models write them
            continue
        for line in describe(output):
            print(line)
        if not output.path:
            final = output.state
    assert final is not None
    print("\ntokens streamed by:", ", ".join(sorted(streamed_by)))
    print("answers by agent:", ", ".join(final["outputs"]))
    print("answer:", final["messages"][-1].text)
    print()
    print(team.get_graph("ascii"), end="")
