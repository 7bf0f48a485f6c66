"""Map-reduce with Send: one task per document, each seeing only its own document, and a
deferred aggregator that waits for them and for a longer branch (three steps to their one)
before it runs, once (without ``defer=True`` it would run after each).

Run: python examples/map_reduce.py
"""

from __future__ import annotations

from graph_agent import END, START, AppendStrategy, RunnableConfig, Send, StateGraph

DOCUMENTS = [
    "Supersteps make parallel work deterministic.",
    "Checkpoints let a crashed run resume where it stopped.",
    "Send runs one task per item, each with its own input.",
]


def plan(state):
    return {"planned": len(state["documents"])}


def fan_out(state):
    """One Send per document: its task sees {"doc": ...} as its whole state."""
    return [Send("summarize", {"doc": doc}) for doc in state["documents"]]


def summarize(item):
    first_words = " ".join(item["doc"].split()[:2])
    return {"summaries": [f"{first_words}..."]}


def fetch_glossary(state):
    return {"glossary": ["superstep", "checkpoint"]}


def check_glossary(state):
    return {"glossary": ["send"]}


def sort_glossary(state):
    return {"glossary_sorted": sorted(state["glossary"])}


def report(state, config: RunnableConfig):
    steps_left = config.task.remaining_steps
    lines = [*state["summaries"], f"glossary: {', '.join(state['glossary_sorted'])}"]
    return {"report": "\n".join(lines), "steps_left": steps_left}


def build():
    strategies = {"summaries": AppendStrategy(), "glossary": AppendStrategy()}
    g = StateGraph("map_reduce", key_strategies=strategies)
    g.add_node("plan", plan)
    g.add_node("summarize", summarize)
    g.add_node("fetch_glossary", fetch_glossary)
    g.add_node("check_glossary", check_glossary)
    g.add_node("sort_glossary", sort_glossary)
    g.add_node("report", report, defer=True)  # waits until nothing else is left to run
    g.add_edge(START, "plan").add_edge(START, "fetch_glossary")
    g.add_conditional_edges("plan", fan_out, sends=["summarize"])
    g.add_edge("fetch_glossary", "check_glossary").add_edge("check_glossary", "sort_glossary")
    g.add_edge("summarize", "report").add_edge("sort_glossary", "report")
    g.add_edge("report", END)
    return g.compile()


if __name__ == "__main__":
    app = build()
    for output in app.stream({"documents": DOCUMENTS}):
        send = f" (Send {output.send_index})" if output.send_index is not None else ""
        print(f"step {output.step:>2}  {output.node + send:<18} {dict(output.update)}")
    final = app.invoke({"documents": DOCUMENTS})
    print(f"\nreport ({final['steps_left']} steps left of 100):\n{final['report']}")
    print(app.get_graph("ascii"))
