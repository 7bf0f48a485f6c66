"""``graph-agent run|demo --trace``: the tree of the run's spans, printed when it is done."""

from __future__ import annotations

from tests.cli.conftest import example


def test_the_demo_prints_the_tree_of_its_run_nodes_model_and_tool_calls(cli):
    result = cli("demo", "--plain", "--trace", "What is 2 ** 10, and what is 100 F in C?")

    assert result.code == 0, result.err
    tree = result.err[result.err.index("trace") :]
    lines = tree.splitlines()
    run = next(i for i, line in enumerate(lines) if "invoke_agent demo" in line)
    assert "finished" in lines[run]
    assert sum("node __model__" in line for line in lines) == 2
    assert sum("chat demo-offline" in line for line in lines) == 2
    assert any("execute_tool calculator" in line for line in lines)
    assert any("execute_tool convert_units" in line for line in lines)
    # a tool call is drawn under the tool node: deeper than the node line
    node = next(i for i, line in enumerate(lines) if "node __tool__" in line)
    call = next(i for i, line in enumerate(lines) if "execute_tool calculator" in line)
    assert call > node and lines[call].index("execute_tool") > lines[node].index("node")
    assert "2 ** 10 = 1024" in result.out  # the answer is still on stdout, the tree apart


def test_run_traces_a_graph_and_without_the_option_prints_no_tree(cli):
    traced = cli("run", f"{example('workflow.py')}:build", '{"topic": "Graphs"}', "--trace")
    plain = cli("run", f"{example('workflow.py')}:build", '{"topic": "Graphs"}')

    assert traced.code == 0 and plain.code == 0, traced.err + plain.err
    assert "invoke_agent" in traced.err and "node " in traced.err
    assert "invoke_agent" not in plain.err and traced.out == plain.out


def test_run_traces_name_the_agents_model_not_the_wrapper_the_command_puts_around_it(cli):
    # without --stream, run asks the model for whole answers through a wrapper
    result = cli("run", f"{example('quickstart.py')}:agent", "Weather in Paris?", "--trace")

    assert result.code == 0, result.err
    assert result.err.count("chat ScriptedChatModel") == 2
    assert "UnstreamedModel" not in result.err
