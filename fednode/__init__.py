"""fednode: the real node agent that drives ``fedsim.protocol`` over real local
directories (TCP, RDMA through pyverbs).  Built in its own issue; for now it
holds the command-line entry point only."""
