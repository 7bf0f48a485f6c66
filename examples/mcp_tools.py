"""MCP tools in an agent: an MCP server (written with the official SDK, in this file) is
started over stdio, and its tools are given to a ReactAgent, which calls them like any tool.

Run: python examples/mcp_tools.py            (needs: pip install 'graph-agent[mcp]')
Or give any agent of the command line the same server's tools, from the repository's root:

    graph-agent run examples/quickstart.py:agent "Weather in Paris?" --mcp examples/mcp.json

which first says which servers and tools the agent got. ``python examples/mcp_tools.py serve``
is the server itself, speaking MCP on its stdin and stdout.
"""

from __future__ import annotations

import sys
from pathlib import Path

from graph_agent import ReactAgent, RunnableConfig
from graph_agent.messages import AssistantMessage, ToolCall, ToolResponseMessage
from graph_agent.models import ModelRequest, ScriptedChatModel

NOTES = {
    "graphs": "A graph runtime runs its nodes in supersteps and checkpoints after each one.",
    "mcp": "An MCP server offers tools over stdio or HTTP, to any agent that connects.",
}


def serve() -> None:
    """The MCP server: two tools over the notes above."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("notes")

    @server.tool()
    def search_notes(query: str) -> str:
        """The titles of the notes that mention the query, comma-separated."""
        found = [title for title, text in NOTES.items() if query.lower() in text.lower()]
        return ", ".join(found) or "no note mentions it"

    @server.tool()
    def read_note(title: str) -> str:
        """The text of the note with that title."""
        return NOTES.get(title, f"there is no note titled {title!r}")

    server.run("stdio")


def read_what_was_found(request: ModelRequest) -> AssistantMessage:
    """The scripted model's second answer: read the first note the search found."""
    title = request.messages[-1].text.split(", ")[0]
    return AssistantMessage(tool_calls=[ToolCall("c2", "read_note", {"title": title})])


def answer_from_the_note(request: ModelRequest) -> str:
    return f"Your notes say: {request.messages[-1].text}"


def main() -> None:
    try:
        from graph_agent.mcp import MCPToolset
    except ImportError:
        print("skipping: the mcp extra is not installed (pip install 'graph-agent[mcp]')")
        return
    servers = {"notes": {"command": sys.executable, "args": [str(Path(__file__)), "serve"]}}
    model = ScriptedChatModel(
        [
            AssistantMessage(tool_calls=[ToolCall("c1", "search_notes", {"query": "supersteps"})]),
            read_what_was_found,
            answer_from_the_note,
        ]
    )
    with MCPToolset(servers) as toolset:  # the server starts here, and stops at the end
        print("tools of the MCP server:", ", ".join(tool.name for tool in toolset))
        agent = ReactAgent("librarian", model, tools=[*toolset])
        config = RunnableConfig(thread_id="notes")
        answer = agent.call("What do my notes say about supersteps?", config)
    for message in agent.get_state(config).values["messages"]:
        if isinstance(message, AssistantMessage) and message.tool_calls:
            for call in message.tool_calls:
                print(f"-> {call.name}({call.arguments})")
        elif isinstance(message, ToolResponseMessage):
            print(f"<- {message.name}: {message.text}")
    print("answer:", answer.text)


if __name__ == "__main__":
    if sys.argv[1:] == ["serve"]:
        serve()
    else:
        main()
