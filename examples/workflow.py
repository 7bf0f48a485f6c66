"""A hand-built workflow: fan-out to parallel reviewers, a barrier join, a conditional loop.

Run: python examples/workflow.py
"""

from __future__ import annotations

from graph_agent import END, START, AppendStrategy, MergeStrategy, StateGraph


def draft(state):
    version = state.value("version", 0) + 1
    text = f"{state['topic']} (v{version})"
    return {"version": version, "draft": text, "log": f"draft v{version}"}


def style_review(state):
    ok = state["version"] >= 2
    return {"scores": {"style": 1.0 if ok else 0.4}, "log": "style review"}


def facts_review(state):
    return {"scores": {"facts": 0.9}, "log": "facts review"}


def legal_review(state):
    return {"scores": {"legal": 1.0}, "log": "legal review"}


def decide(state):
    return {"log": f"decide: {dict(state['scores'])}"}


def route(state) -> str:
    return "publish" if min(state["scores"].values()) >= 0.8 else "revise"


def build():
    g = StateGraph("review", key_strategies={"log": AppendStrategy(), "scores": MergeStrategy()})
    g.add_node("draft", draft)
    g.add_node("style", style_review)
    g.add_node("facts", facts_review)
    g.add_node("legal", legal_review)
    g.add_node("decide", decide)
    g.add_edge(START, "draft")
    for reviewer in ("style", "facts", "legal"):
        g.add_edge("draft", reviewer)  # fan-out: the reviewers run in parallel
    g.add_edge(["style", "facts", "legal"], "decide")  # barrier: wait for all three
    g.add_conditional_edges("decide", route, {"revise": "draft", "publish": END})
    return g.compile()


if __name__ == "__main__":
    app = build()
    for output in app.stream({"topic": "Graph runtimes"}):
        print(f"step {output.step:>2}  {output.node:<10} {dict(output.update)}")
    final = app.invoke({"topic": "Graph runtimes"})
    print("\nfinal draft:", final["draft"])
    print(app.get_graph("ascii"))
