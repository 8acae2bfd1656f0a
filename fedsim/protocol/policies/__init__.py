"""Policies: one object each, imported unchanged by the simulator and the agent."""
