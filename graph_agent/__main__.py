"""``python -m graph_agent``: the same as the ``graph-agent`` command (and ``python -m
graph_agent.cli``). Only running it loads the command line; ``import graph_agent`` does not."""

from graph_agent.cli.main import main

raise SystemExit(main())
