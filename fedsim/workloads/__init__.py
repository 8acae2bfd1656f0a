"""Workloads that drive a simulated federation."""
