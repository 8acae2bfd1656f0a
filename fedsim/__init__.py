"""fedsim: simulation framework for federated cluster file systems."""
