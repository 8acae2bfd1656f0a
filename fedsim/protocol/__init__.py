"""Protocol-level data structures and algorithms used by FedFS nodes."""
