"""The graph runtime core: state, builder, engine, drivers and diagram export.

Knows nothing of agents, models or networks.
"""
