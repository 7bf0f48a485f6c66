"""graph-agent serve: graphs and agents behind LangGraph Server's HTTP API (needs the ``serve``
extra: ``pip install 'graph-agent[serve]'``)."""

from graph_agent.serve.app import ApiError, create_app
from graph_agent.serve.records import Records

__all__ = ["ApiError", "Records", "create_app"]
