"""The graph runtime core: state, builder, engine, drivers and diagram export.

Knows nothing of agents, models or networks.
"""

from graph_agent.graph.types import Send

__all__ = ["Send"]
