"""LogGP network model with presets for the papers' hardware and today's.

LogGP (Alexandrov et al.; the dNFSp paper's model): a message of s bytes costs
its sender an overhead ``o``, occupies the sender's NIC for max(g, (s-1)G),
flies for ``L`` and costs the receiver ``o``.  One-way time:
o + (s-1)G + L + o.  The NIC occupancy is what makes bursts (dirmerge fan-out,
summary pushes) queue up at the sender.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LogGP:
    """Parameters in microseconds (L, o, g) and microseconds per byte (G)."""

    L: float
    o: float
    g: float
    G: float
    name: str = "custom"

    def one_way(self, size: int) -> float:
        """Latency of one message of ``size`` bytes on an idle network, in us."""
        return 2 * self.o + max(size - 1, 0) * self.G + self.L

    def occupancy(self, size: int) -> float:
        """How long the sender's NIC is busy with the message, in us."""
        return max(self.g, max(size - 1, 0) * self.G)


_MB = 1e6  # the papers' MB/s are 10^6 bytes per second

PRESETS: dict[str, LogGP] = {
    # Giganet cLAN VIA, Federated DAFS VI: 8 us one-way for 1-byte packets, 105 MB/s.
    "via_clan": LogGP(L=5.0, o=1.5, g=2.0, G=1 / (105 * _MB) * 1e6, name="via_clan"),
    # The FedFS prototype's messaging (FedFS 4.1): network + queuing about 200 us per
    # request/reply exchange, i.e. ~100 us one way, on the same cLAN hardware.
    "fedfs_prototype": LogGP(L=8.0, o=46.0, g=10.0, G=1 / (105 * _MB) * 1e6, name="fedfs_prototype"),
    # Ursa Minor's metadata servers (CMU-PDL-06-105, Table 2 and 5.1): Intel e1000 gigabit
    # Ethernet through one Dell PowerConnect 5224 switch, user-level servers over RPC; the
    # paper's ping is 230 us a round trip, so 115 us one way, most of it the hosts' stacks (o).
    "ursa": LogGP(L=25.0, o=45.0, g=10.0, G=1 / (117 * _MB) * 1e6, name="ursa"),
    # A modern InfiniBand HDR link with verbs: ~1.2 us one-way small messages, 25 GB/s.
    "infiniband_hdr": LogGP(L=0.8, o=0.2, g=0.1, G=1 / (25_000 * _MB) * 1e6, name="infiniband_hdr"),
    # TCP over loopback between two Python agents (order of magnitude; `fednode bench`
    # measures the machine at hand and writes a profile that replaces this).
    "tcp_loopback": LogGP(L=5.0, o=10.0, g=2.0, G=1 / (5_000 * _MB) * 1e6, name="tcp_loopback"),
}


def preset(name: str) -> LogGP:
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown network preset {name!r}; allowed: {', '.join(PRESETS)}") from None
