"""Tools beside the agent, not part of it: the Soft-RoCE test bed
(``testbed``), the federation benchmark behind ``fednode bench`` (``bench``)
and the local layer's micro-benchmark (``localfs_bench``).

The agent (runtime, transports, local layer, client) never imports them; the
CLI loads one only for the command that needs it.  What the agent itself
runs for a ``bench`` request lives with the agent (``fednode.bench_ops``).
"""
