"""``python -m graph_agent.cli``: the same as the ``graph-agent`` command."""

from graph_agent.cli.main import main

raise SystemExit(main())
