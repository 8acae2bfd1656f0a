"""RDMA transport: one reliable-connected queue pair per peer, through pyverbs.

The agents of a federation on an RDMA fabric (InfiniBand, RoCE; Soft-RoCE in
the test bed) talk through verbs, as the papers' nodes talked through VIA.
The design follows Federated DAFS:

* **Set-up over TCP.**  A peer connection starts as the TCP transport's
  authenticated connection (the same HMAC handshake).  The connecting side then
  sends an ``RDMA`` envelope with its queue pair's parameters (QP number, PSN,
  GID and LID, MTU, its landing region's address and key, buffer sizes); the
  other side creates its queue pair, connects it and answers in kind.  The TCP
  connection stays open as the control channel: when it drops (a killed
  peer) the RDMA connection is torn down at once, without waiting for the
  queue pair's retry timeout.  Client programs stay on TCP.
* **Messages by SEND/RECV.**  Each side posts ``recv_depth`` receive buffers
  of ``inline_bytes`` when the connection is made (registered then, off the
  request path) and the sender holds as many credits.  Every message returns
  the credits its sender has freed since its last one; an explicit credit
  message goes when half the window is owed and nothing else is leaving.
  Data needs two credits, a credit message one, so the last credit is always
  left for returning credits and the two sides can never both wait.  Only
  one SEND in eight is signalled (or one when buffers run low): on an RC
  queue pair its completion implies the earlier ones', and the others cost
  no completion event (measured in the guest: half the events).
* **Bulk data by RDMA.**  A request names one of the requester's landing
  slots (``bulk: write``); a reply too big for a receive buffer is
  RDMA-WRITTEN there with immediate data (slot and credits), one operation
  and one completion at the requester.  With ``bulk: read``, and for any large
  request (a big Write's payload) or a reply without a free slot, the sender
  exposes the message in a registered staging slot and sends its address;
  the receiver RDMA-READs it and says when it is done.  Messages are handed
  to the agent in the order they were sent, whichever way they travelled.
* **Completions** arrive on a completion channel watched by the event loop
  (no core burnt while idle).  After an event, while a reply is expected on
  that connection, the loop polls the completion queue for up to an adaptive
  ``spin_us`` (doubled when a spin catches a completion, halved when it does
  not): the next completion then costs no trip through epoll.
* **Failures.**  An error completion, a queue pair in the error state or the
  loss of the control connection closes the connection: the agent's pending
  calls on it raise ``PeerUnavailable`` and the verbs status is logged.  The
  next call to that peer connects again.

``transport: auto`` uses verbs where the node has a usable device and TCP
otherwise; an agent that speaks only TCP answers an ``RDMA`` envelope with an
error, and an ``auto`` peer then stays on TCP with it.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import struct
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fednode import wire
from fednode.transport.tcp import TcpConn, TcpTransport
from fedsim.protocol.messages import PeerUnavailable, ProtocolError, decode_error, encode_error, pack, unpack
from fedsim.schema import ConfigError

if TYPE_CHECKING:
    from fednode.config import Cluster, RdmaSpec

log = logging.getLogger("fednode.verbs")

# ibv_wc_status, in ABI order: how a failed completion is reported in the log.
WC_STATUS = (
    "success", "local length error", "local QP operation error", "local EE context operation error",
    "local protection error", "work request flushed", "memory window bind error", "bad response",
    "local access error", "remote invalid request", "remote access error", "remote operation error",
    "transport retry counter exceeded", "RNR retry counter exceeded", "local RDD violation",
    "remote invalid RD request", "remote aborted", "invalid EE context number", "invalid EE context state",
    "fatal error", "response timeout", "general error",
)  # fmt: skip
HDR = struct.Struct("<BHI")  # message type, credits returned, aux (named slot + 1, or a token)
PULL = struct.Struct("<QIIi")  # exposed address, rkey, length, named slot (-1: none)
T_MSG, T_PULL, T_CREDIT, T_DONE = 1, 2, 3, 4
SIGNAL_EVERY = 8
# work request ids: kind << 32 | index
W_RECV, W_SEND, W_STAGE, W_READ = 1, 2, 3, 4
ACCESS = 1 | 2 | 4  # IBV_ACCESS_LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ
EVENT_FD_NAME = "[infinibandevent]"


class VerbsUnavailable(RuntimeError):
    """No usable verbs provider here: the reason says what is missing."""


def _pyverbs() -> Any:
    try:
        import pyverbs.enums as e
    except ImportError as exc:
        raise VerbsUnavailable(
            f"pyverbs is not importable ({exc}): install Debian's python3-pyverbs and run under /usr/bin/python3 "
            "(or a venv made with --system-site-packages)"
        ) from None
    return e


def devices() -> list[str]:
    """Names of the RDMA devices here (VerbsUnavailable when there are none)."""
    _pyverbs()
    from pyverbs.device import get_device_list
    from pyverbs.pyverbs_error import PyverbsError

    try:
        names = [d.name.decode() for d in get_device_list()]
    except PyverbsError as exc:  # rdma-core raises (not returns []) when no device exists
        raise VerbsUnavailable(f"no RDMA device: {exc}") from None
    if not names:
        raise VerbsUnavailable("no RDMA device")
    return names


def default_gid_index(device: str, port: int = 1) -> int:
    """The first non-zero RoCE v2 GID of the port (IB ports: index 0).  RoCE v1
    and link-local-only choices are the user's to make with ``gid_index``."""
    base = Path(f"/sys/class/infiniband/{device}/ports/{port}")
    try:
        layer = (base / "link_layer").read_text().strip()
    except OSError:
        layer = "Ethernet"
    if layer == "InfiniBand":
        return 0
    first = None
    for i in range(256):
        try:
            gid = (base / "gids" / str(i)).read_text().strip()
            kind = (base / "gid_attrs" / "types" / str(i)).read_text().strip()
        except OSError:
            continue
        if gid.replace(":", "").strip("0") == "":
            continue
        first = i if first is None else first
        if "v2" in kind:
            return i
    if first is None:
        raise VerbsUnavailable(f"{device} port {port} has no GID (is its network device up?)")
    return first


def _event_fds() -> set[int]:
    out = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            if EVENT_FD_NAME in os.readlink(f"/proc/self/fd/{name}"):
                out.add(int(name))
        except OSError:
            continue
    return out


class Device:
    """An opened device, its protection domain and the port's addressing."""

    def __init__(self, name: str | None, gid_index: int | None, port: int) -> None:
        e = _pyverbs()
        from pyverbs.device import Context
        from pyverbs.pd import PD
        from pyverbs.pyverbs_error import PyverbsError

        names = devices()
        if name is None:
            name = names[0]
        elif name not in names:
            raise VerbsUnavailable(f"RDMA device {name!r} not found; this host has {', '.join(names)}")
        self.name = name
        self.port = port
        try:
            self.ctx = Context(name=name)
            self.pd = PD(self.ctx)
            pa = self.ctx.query_port(port)
            self.gid_index = default_gid_index(name, port) if gid_index is None else gid_index
            self.gid = str(self.ctx.query_gid(port, self.gid_index))
            dev = self.ctx.query_device()
        except PyverbsError as exc:
            raise VerbsUnavailable(f"cannot open {name} port {port}: {exc}") from None
        if pa.state != e.IBV_PORT_ACTIVE:
            raise VerbsUnavailable(f"{name} port {port} is not active (state {pa.state})")
        self.lid = pa.lid
        self.mtu = pa.active_mtu
        self.rd_atom = max(1, min(4, dev.max_qp_rd_atom, dev.max_qp_init_rd_atom))
        self.ib = pa.link_layer == e.IBV_LINK_LAYER_INFINIBAND

    def comp_channel(self) -> tuple[Any, int]:
        """A completion channel and its file descriptor.  pyverbs does not
        expose the descriptor, so it is found as the new ``[infinibandevent]``
        entry of /proc/self/fd (creation is synchronous on the loop's thread)."""
        from pyverbs.cq import CompChannel

        before = _event_fds()
        chan = CompChannel(self.ctx)
        new = _event_fds() - before
        if len(new) != 1:
            chan.close()
            raise VerbsUnavailable("cannot find the completion channel's file descriptor")
        fd = new.pop()
        os.set_blocking(fd, False)
        return chan, fd

    def close(self) -> None:
        self.pd.close()
        self.ctx.close()


class VerbsConn:
    """One RC queue pair to a peer; the agent's ``Conn`` once connected."""

    def __init__(self, vt: VerbsTransport, tcp: TcpConn, peer: int) -> None:
        e = _pyverbs()
        from pyverbs.cq import CQ
        from pyverbs.mr import MR
        from pyverbs.pyverbs_error import PyverbsError
        from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
        from pyverbs.wr import SGE, RecvWR, SendWR

        # bound once: posting and completion handling are the hot path
        self._sge, self._recv_wr, self._send_wr, self._verbs_error = SGE, RecvWR, SendWR, PyverbsError

        self.e = e
        self.vt = vt
        self.tcp = tcp
        self.peer = peer
        self.closed = False
        self.open = False
        self.loop = asyncio.get_running_loop()
        self.ready: asyncio.Future[Any] = self.loop.create_future()
        cfg = vt.rdma
        dev = vt.dev
        assert dev is not None
        self.buf = cfg.inline_bytes  # the size of every send and receive buffer
        self.inline = self.buf  # the largest SEND to this peer: min(ours, theirs) once connected
        self.depth = cfg.recv_depth
        self.slot = cfg.slot_bytes
        nsend = self.depth + 4
        self.nread = dev.rd_atom
        sq = nsend + cfg.stage_slots + self.nread + 4
        self.chan, self.fd = dev.comp_channel()
        self.cq = CQ(dev.ctx, sq + self.depth + 8, None, self.chan, 0)
        self.recv_mr = MR(dev.pd, self.depth * self.buf, ACCESS)
        self.send_mr = MR(dev.pd, nsend * self.buf, ACCESS)
        self.land_mr = MR(dev.pd, max(1, cfg.reply_slots) * self.slot, ACCESS)
        self.stage_mr = MR(dev.pd, cfg.stage_slots * self.slot, ACCESS)
        self.pull_mr = MR(dev.pd, self.slot, ACCESS)  # where an RDMA READ lands (one at a time)
        cap = QPCap(max_send_wr=sq, max_recv_wr=self.depth, max_send_sge=1, max_recv_sge=1)
        init = QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.cq, rcq=self.cq, cap=cap, sq_sig_all=0)
        attr = QPAttr(port_num=dev.port)
        attr.qp_access_flags = ACCESS
        self.qp = QP(dev.pd, init, attr)
        self.psn = int.from_bytes(os.urandom(3), "little")
        # flow control and buffers
        self.credits = 0  # set from the peer's recv_depth when connected
        self.owed = 0  # receive buffers freed since the last credits we returned
        self.free_send = list(range(nsend))
        # SENDs are signalled one in SIGNAL_EVERY (or when buffers run low): on an
        # RC queue pair a completion implies every earlier one, so the signalled
        # SEND frees the buffers of the unsignalled ones before it, and the
        # others cost no completion event
        self.unsignaled: list[int] = []
        self.batches: dict[int, list[int]] = {}
        self.free_stage = list(range(cfg.stage_slots))
        self.free_land = list(range(cfg.reply_slots)) if cfg.bulk == "write" else []
        self.named: dict[int, int] = {}  # our request id -> our landing slot named in it
        self.their_names: dict[int, int] = {}  # their request id -> their landing slot for our reply
        self.exposed: dict[int, tuple[int, Any]] = {}  # token -> (stage slot or -1, dynamic MR)
        self._token = 0
        self.backlog: deque[tuple[int, bytes, int]] = deque()  # (type, payload, slot)
        self.reads: deque[list[Any]] = deque()  # pulls waiting for the READ slot
        self.reading: tuple[list[Any], Any] | None = None  # (inbox entry, the MR it lands in)
        self.inbox: deque[list[Any]] = deque()  # [payload or None] in arrival order
        self.expecting = 0  # requests sent here whose reply has not come
        self.spin_ns = 0
        self.spin_max = int(cfg.spin_us * 1000)
        for i in range(self.depth):
            self._post_recv(i)
        self.cq.req_notify()
        self.loop.add_reader(self.fd, self._on_event)

    # ------------------------------------------------------------------ set-up
    def info(self) -> tuple[Any, ...]:
        dev = self.vt.dev
        assert dev is not None
        return (
            self.qp.qp_num, self.psn, dev.gid, dev.lid, dev.mtu, self.land_mr.buf, self.land_mr.rkey,
            self.slot, self.depth, self.buf,
        )  # fmt: skip

    def connect(self, remote: Any) -> None:
        """Move the queue pair to ready-to-send towards ``remote`` (its info())."""
        from pyverbs.addr import GID, AHAttr, GlobalRoute
        from pyverbs.qp import QPAttr

        ok = (
            isinstance(remote, tuple)
            and len(remote) == 10
            and all(type(v) is int for i, v in enumerate(remote) if i != 2)
        )
        if not ok or not isinstance(remote[2], str):
            raise ProtocolError("malformed RDMA connection parameters")
        qpn, psn, gid, lid, mtu, addr, rkey, slot, depth, inline = remote
        dev = self.vt.dev
        assert dev is not None
        a = QPAttr(port_num=dev.port)
        a.qp_access_flags = ACCESS
        a.path_mtu = min(dev.mtu, mtu)
        a.dest_qp_num = qpn
        a.rq_psn = psn
        a.sq_psn = self.psn
        a.max_dest_rd_atomic = dev.rd_atom
        a.max_rd_atomic = dev.rd_atom
        a.min_rnr_timer = 1
        a.timeout = 14  # 67 ms per try
        a.retry_cnt = 7
        a.rnr_retry = 7
        gr = GlobalRoute(dgid=GID(gid), sgid_index=dev.gid_index)
        a.ah_attr = AHAttr(port_num=dev.port, is_global=1, gr=gr, dlid=lid)
        self.qp.to_rts(a)
        self.their_land = (addr, rkey, slot)
        self.credits = depth
        self.inline = min(self.inline, inline)
        self.open = True

    # ------------------------------------------------------------------ Conn
    def send(self, payload: bytes) -> None:
        if self.closed:
            raise ConnectionError("RDMA connection closed")
        n = len(payload)
        if n > self.vt.max_size:
            raise ProtocolError(f"message of {n} bytes exceeds the {self.vt.max_size}-byte limit")
        kind, rid = wire.peek(payload)
        slot = -1
        if kind == wire.REQUEST or kind == wire.PING:
            self.expecting += 1
            if self.free_land:
                slot = self.free_land.pop()
                self.named[rid] = slot
        elif kind == wire.REPLY or kind == wire.ERROR or kind == wire.PONG:
            theirs = self.their_names.pop(rid, -1)
            if n + HDR.size > self.inline and 0 <= theirs and n <= self.their_land[2]:
                self.backlog.append((W_STAGE, payload, theirs))  # RDMA WRITE into their slot
                self._pump()
                return
        self.backlog.append((T_MSG if n + HDR.size <= self.inline else T_PULL, payload, slot))
        self._pump()

    def close(self, reason: str = "closed") -> None:
        if self.closed:
            return
        self.closed = True
        was_open = self.open
        self.open = False
        try:
            self.loop.remove_reader(self.fd)
        except Exception:  # the loop is closing
            pass
        self.vt.conns.discard(self)
        self.tcp.close()
        if not self.ready.done():
            self.ready.set_exception(PeerUnavailable(self.peer, reason))
            self.ready.exception()
        if was_open:
            self.vt.agent.on_lost(self, reason)
        for _, mr in self.exposed.values():
            if mr is not None:
                mr.close()
        for res in (self.qp, self.recv_mr, self.send_mr, self.land_mr, self.stage_mr, self.pull_mr, self.cq):
            try:
                res.close()
            except Exception as exc:  # a resource the provider already tore down
                log.debug("closing %s: %s", type(res).__name__, exc)
        try:
            self.chan.close()
        except Exception as exc:
            log.debug("closing the completion channel: %s", exc)

    def fail(self, reason: str) -> None:
        """Tear the connection down because of ``reason`` (logged once)."""
        if not self.closed:
            log.warning("node %d: RDMA connection to node %d failed: %s", self.vt.me, self.peer, reason)
            self.vt.failures += 1
            self.close(reason)

    # ------------------------------------------------------------------ posting
    def _post_recv(self, i: int) -> None:
        sge = self._sge(self.recv_mr.buf + i * self.buf, self.buf, self.recv_mr.lkey)
        self.qp.post_recv(self._recv_wr(wr_id=(W_RECV << 32) | i, num_sge=1, sg=[sge]))

    def _post(self, wr_id: int, opcode: int, addr: int, n: int, lkey: int, remote: tuple[int, int] | None = None,
              imm: int = 0, signaled: bool = True) -> None:  # fmt: skip
        wr = self._send_wr(wr_id=wr_id, opcode=opcode, num_sge=1, imm_data=imm, sg=[self._sge(addr, n, lkey)],
                    send_flags=self.e.IBV_SEND_SIGNALED if signaled else 0)  # fmt: skip
        if remote is not None:
            wr.set_wr_rdma(remote[1], remote[0])
        self.qp.post_send(wr)

    def _send_msg(self, mtype: int, aux: int, body: bytes) -> None:
        """One SEND from a free send buffer, returning the credits we owe."""
        i = self.free_send.pop()
        off = i * self.buf
        data = HDR.pack(mtype, self.owed, aux) + body
        self.owed = 0
        self.credits -= 1
        self.send_mr.write(data, len(data), off)
        signaled = len(self.unsignaled) >= SIGNAL_EVERY - 1 or len(self.free_send) <= 2
        if signaled:
            self.batches[i] = self.unsignaled
            self.unsignaled = []
        else:
            self.unsignaled.append(i)
        self._post((W_SEND << 32) | i, self.e.IBV_WR_SEND, self.send_mr.buf + off, len(data), self.send_mr.lkey,
                   signaled=signaled)  # fmt: skip
        self.vt.stats["sends"] += 1

    def _pump(self) -> None:
        """Post what the credits and buffers allow, in order; then return
        credits if half the window is owed and nothing carried them."""
        if self.closed:
            return
        e = self.e
        stats = self.vt.stats
        try:
            self._send_done()
            while self.backlog and self.credits >= 2 and self.free_send:
                mtype, payload, slot = self.backlog[0]
                n = len(payload)
                if mtype == T_MSG:
                    self._send_msg(T_MSG, slot + 1, payload)
                elif mtype == T_DONE:
                    self._send_msg(T_DONE, slot, b"")
                elif mtype == W_STAGE:  # RDMA WRITE with immediate into the slot they named
                    if not self.free_stage:
                        break
                    j = self.free_stage.pop()
                    self.stage_mr.write(payload, n, j * self.slot)
                    addr, rkey, size = self.their_land
                    imm = (slot << 16) | self.owed
                    self.owed = 0
                    self.credits -= 1
                    self._post((W_STAGE << 32) | j, e.IBV_WR_RDMA_WRITE_WITH_IMM, self.stage_mr.buf + j * self.slot,
                               n, self.stage_mr.lkey, (addr + slot * size, rkey), imm)  # fmt: skip
                    stats["rdma_writes"] += 1
                    stats["rdma_bytes"] += n
                else:  # T_PULL: expose it, tell them where
                    if n <= self.slot:
                        if not self.free_stage:
                            break
                        j, mr = self.free_stage.pop(), None
                        self.stage_mr.write(payload, n, j * self.slot)
                        addr, rkey = self.stage_mr.buf + j * self.slot, self.stage_mr.rkey
                    else:  # bigger than a slot: registered for this message only
                        from pyverbs.mr import MR

                        j, mr = -1, MR(self.vt.dev.pd, n, ACCESS)  # type: ignore[union-attr]
                        mr.write(payload, n, 0)
                        addr, rkey = mr.buf, mr.rkey
                        stats["registrations"] += 1
                    self._token = (self._token + 1) & 0xFFFFFFFF
                    self.exposed[self._token] = (j, mr)
                    self._send_msg(T_PULL, self._token, PULL.pack(addr, rkey, n, slot))
                    stats["exposed"] += 1
                self.backlog.popleft()
            if self.backlog:
                stats["stalls"] += 1
            while self.reads and self.reading is None:
                self._start_read(self.reads.popleft())
            if self.owed >= max(1, self.depth // 2) and self.credits >= 1 and self.free_send:
                self._send_msg(T_CREDIT, 0, b"")
                stats["credit_msgs"] += 1
        except Exception as exc:  # a post refused: the queue pair is in error
            self.fail(f"posting failed: {exc}")

    def _start_read(self, entry: list[Any]) -> None:
        addr, rkey, n = entry[1:4]
        if n <= self.slot:
            mr = self.pull_mr
        else:
            from pyverbs.mr import MR

            mr = MR(self.vt.dev.pd, n, ACCESS)  # type: ignore[union-attr]
            self.vt.stats["registrations"] += 1
        self.reading = (entry, mr)
        self._post((W_READ << 32), self.e.IBV_WR_RDMA_READ, mr.buf, n, mr.lkey, (addr, rkey))
        self.vt.stats["rdma_reads"] += 1
        self.vt.stats["rdma_bytes"] += n

    # ------------------------------------------------------------------ completions
    def _on_event(self) -> None:
        if self.closed:
            return
        try:
            self.chan.get_cq_event(self.cq)
            self.cq.ack_events(1)
            self.cq.req_notify()
        except self._verbs_error as exc:
            if getattr(exc, "error_code", 0) != errno.EAGAIN:  # EAGAIN: a spurious wake-up
                self.fail(f"completion channel: {exc}")
            return
        self.vt.stats["events"] += 1
        self._drain()
        if self.spin_max and self.expecting and not self.closed:
            self._spin()

    def _spin(self) -> None:
        """Poll while a reply is expected, for the adaptive window."""
        perf = time.perf_counter_ns
        window = self.spin_ns or min(self.spin_max, 10_000)
        deadline = perf() + window
        stats = self.vt.stats
        while perf() < deadline:
            if self._drain():
                stats["spin_hits"] += 1
                self.spin_ns = min(self.spin_max, window * 2)
                if not self.expecting or self.closed:
                    return
                window = self.spin_ns
                deadline = perf() + window
        stats["spin_misses"] += 1
        self.spin_ns = max(1000, window // 2)

    def _drain(self) -> int:
        total = 0
        while not self.closed:
            n, wcs = self.cq.poll(16)
            if not n:
                break
            total += n
            for wc in wcs:
                self._on_wc(wc)
                if self.closed:
                    return total
        if total:
            self._pump()
        return total

    def _on_wc(self, wc: Any) -> None:
        e = self.e
        kind, i = wc.wr_id >> 32, wc.wr_id & 0xFFFFFFFF
        if wc.status != e.IBV_WC_SUCCESS:
            what = {W_RECV: "receive", W_SEND: "send", W_STAGE: "RDMA write", W_READ: "RDMA read"}.get(kind, "?")
            status = WC_STATUS[wc.status] if wc.status < len(WC_STATUS) else "unknown"
            self.fail(f"{what} completed with status {wc.status} ({status}), vendor error {wc.vendor_err}")
            return
        if kind == W_SEND:
            self.free_send.append(i)
            self.free_send.extend(self.batches.pop(i, ()))
        elif kind == W_STAGE:
            self.free_stage.append(i)
        elif kind == W_READ:
            self._read_done()
        elif wc.opcode == e.IBV_WC_RECV_RDMA_WITH_IMM:
            slot, credits = wc.imm_data >> 16, wc.imm_data & 0xFFFF
            self.vt.stats["recvs"] += 1
            if slot >= self.vt.rdma.reply_slots or wc.byte_len > self.slot:
                self.fail(f"RDMA write into landing slot {slot} that does not exist")
                return
            data = self.land_mr.read(wc.byte_len, slot * self.slot)
            self._post_recv(i)
            self.owed += 1
            self.credits += credits
            self._deliver(data)
        else:
            self.vt.stats["recvs"] += 1
            raw = self.recv_mr.read(wc.byte_len, i * self.buf)
            self._post_recv(i)
            self.owed += 1
            if len(raw) < HDR.size:
                self.fail("a message shorter than its header")
                return
            mtype, credits, aux = HDR.unpack_from(raw)
            self.credits += credits
            if mtype == T_MSG:
                self._deliver(raw[HDR.size :], aux - 1)
            elif mtype == T_PULL:
                addr, rkey, n, named = PULL.unpack_from(raw, HDR.size)
                if n > self.vt.max_size:
                    self.fail(f"peer offered a {n}-byte message; the limit is {self.vt.max_size}")
                    return
                entry: list[Any] = [None, addr, rkey, n, aux, named]
                self.inbox.append(entry)
                self.reads.append(entry)
            elif mtype == T_DONE:
                j, mr = self.exposed.pop(aux, (-2, None))
                if j >= 0:
                    self.free_stage.append(j)
                elif mr is not None:
                    mr.close()
            elif mtype != T_CREDIT:
                self.fail(f"unknown message type {mtype}")

    def _read_done(self) -> None:
        assert self.reading is not None
        entry, mr = self.reading
        self.reading = None
        _, _, _, n, token, named = entry
        data = mr.read(n, 0)
        if mr is not self.pull_mr:
            mr.close()
        self.backlog.appendleft((T_DONE, b"", token))  # free their staging slot first (sent by _pump)
        entry[0] = data
        self._remember(data, named)
        self._flush()

    def _send_done(self) -> None:
        # T_DONE is control: it may take the last credit, ahead of the backlog
        while self.backlog and self.backlog[0][0] == T_DONE and self.credits >= 1 and self.free_send:
            _, _, token = self.backlog.popleft()
            self._send_msg(T_DONE, token, b"")

    # ------------------------------------------------------------------ delivery
    def _remember(self, payload: bytes, named: int) -> None:
        """Book-keeping a message implies: a request naming a landing slot for
        its reply, or a reply freeing the slot we named."""
        try:
            kind, rid = wire.peek(payload)
        except ProtocolError:
            return  # the agent answers garbled frames
        if kind == wire.REQUEST or kind == wire.PING:
            if 0 <= named < 256:
                self.their_names[rid] = named
        elif kind == wire.REPLY or kind == wire.ERROR or kind == wire.PONG:
            self.expecting = max(0, self.expecting - 1)
            slot = self.named.pop(rid, None)
            if slot is not None:
                self.free_land.append(slot)

    def _deliver(self, payload: bytes, named: int = -1) -> None:
        self._remember(payload, named)
        if self.inbox:  # a pulled message is still arriving: keep the order
            self.inbox.append([payload])
            return
        self.vt.agent.on_frame(self, payload)

    def _flush(self) -> None:
        while self.inbox and self.inbox[0][0] is not None and not self.closed:
            self.vt.agent.on_frame(self, self.inbox.popleft()[0])

    def force_error(self) -> None:
        """Move the queue pair to the error state (fault injection in tests:
        what a cable pull or a provider fault does)."""
        from pyverbs.qp import QPAttr

        self.qp.modify(QPAttr(qp_state=self.e.IBV_QPS_ERR), self.e.IBV_QP_STATE)


class VerbsTransport(TcpTransport):
    """TCP for the handshake, the set-up and client programs; verbs for peers."""

    name = "verbs"

    def __init__(self, cluster: Cluster, node_id: int, kind: str = "verbs") -> None:
        super().__init__(cluster, node_id)
        spec = cluster.spec
        me = spec.node(node_id)
        self.rdma: RdmaSpec = spec.rdma
        self.auto = kind == "auto"
        self.dev: Device | None = None
        self.fallback = ""
        try:
            self.dev = Device(me.rdma_device, me.gid_index, self.rdma.port)
        except VerbsUnavailable as exc:
            if not self.auto:
                raise ConfigError(f"node {node_id}: transport 'verbs' is not usable here: {exc}") from None
            self.fallback = str(exc)
            self.name = "tcp"
            log.info("node %d: transport auto: using TCP (%s)", node_id, exc)
        self.conns: set[VerbsConn] = set()
        self.bound: dict[TcpConn, VerbsConn] = {}
        self.failures = 0
        self.stats = dict.fromkeys(
            ("sends", "recvs", "rdma_writes", "rdma_reads", "rdma_bytes", "exposed", "registrations", "credit_msgs",
             "stalls", "events", "spin_hits", "spin_misses"), 0,
        )  # fmt: skip

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        if self.dev is None:
            out["fallback"] = self.fallback
            return out
        out.update(
            device=self.dev.name, gid_index=self.dev.gid_index, gid=self.dev.gid, bulk=self.rdma.bulk,
            rdma_connections=len(self.conns), rdma_failures=self.failures, rdma=dict(self.stats),
        )  # fmt: skip
        return out

    def connection(self, peer: int) -> VerbsConn | None:
        """The open RDMA connection this agent made to ``peer`` (tests' fault injection)."""
        conn = self.agent.peers.get(peer)
        return conn if isinstance(conn, VerbsConn) else None

    async def connect(self, node: int) -> Any:
        tcp = await super().connect(node)
        if self.dev is None:
            return tcp
        try:
            vc = VerbsConn(self, tcp, node)
        except Exception as exc:
            tcp.close()
            raise PeerUnavailable(node, f"cannot create a queue pair: {exc}") from None
        self.bound[tcp] = vc
        self.conns.add(vc)
        tcp.send(pack((wire.RDMA, 0, vc.info())))
        try:
            return await asyncio.wait_for(asyncio.shield(vc.ready), self.connect_timeout)
        except TimeoutError:
            vc.close("no RDMA parameters within the connect timeout")
            raise PeerUnavailable(node, "no RDMA connection parameters within the connect timeout") from None

    def deliver(self, conn: TcpConn, payload: bytes) -> None:
        vc = self.bound.get(conn)
        if vc is not None:
            self._answered(vc, conn, payload)
            return
        try:
            kind, _ = wire.peek(payload)
        except ProtocolError:
            kind = -1
        if kind == wire.RDMA and conn.peer != wire.CLIENT_ID and self.dev is not None:
            self._accept(conn, payload)
        else:  # a client program, or a TCP-only peer: plain TCP
            self.agent.on_frame(conn, payload)

    def _accept(self, tcp: TcpConn, payload: bytes) -> None:
        """Server side: their parameters arrived; connect our queue pair, answer with ours."""
        try:
            _, _, remote = unpack(payload, wire.HANDSHAKE_MAX, use_list=False)
            vc = VerbsConn(self, tcp, tcp.peer)
        except Exception as exc:
            reason = f"cannot set up RDMA: {exc}"
            log.warning("node %d: from node %d: %s", self.me, tcp.peer, reason)
            tcp.send(pack((wire.ERROR, 0, encode_error(OSError(errno.EPROTO, reason)), None)))
            tcp.close()
            return
        self.bound[tcp] = vc
        self.conns.add(vc)
        try:
            vc.connect(remote)
        except Exception as exc:
            reason = f"cannot connect the queue pair: {exc}"
            tcp.send(pack((wire.ERROR, 0, encode_error(OSError(errno.EPROTO, reason)), None)))
            vc.fail(reason)
            return
        tcp.send(pack((wire.RDMA, 0, vc.info())))
        vc.ready.set_result(vc)

    def _answered(self, vc: VerbsConn, tcp: TcpConn, payload: bytes) -> None:
        """Connecting side: their answer; or any frame on an upgraded control channel."""
        if vc.ready.done():
            vc.fail("unexpected frame on the RDMA control channel")
            return
        try:
            env = wire.decode(payload, wire.HANDSHAKE_MAX)
            if env[0] == wire.RDMA:
                vc.connect(env[2])
                vc.ready.set_result(vc)
                return
            if env[0] != wire.ERROR:
                raise ProtocolError(f"a {wire.KIND_NAMES[env[0]]} envelope instead of RDMA parameters")
            reason = str(decode_error(env[2]))
        except Exception as exc:
            reason = f"bad RDMA parameters: {exc}"
        if self.auto and not tcp.closed:  # a peer without RDMA: stay on TCP with it
            log.info("node %d: node %d answered without RDMA (%s): using TCP", self.me, vc.peer, reason)
            del self.bound[tcp]
            vc.tcp = _Detached()  # the TCP connection stays open, for the agent
            vc.ready.set_result(tcp)
            vc.close(reason)
            return
        vc.fail(reason)

    def lost(self, conn: TcpConn, reason: str) -> None:
        vc = self.bound.pop(conn, None)
        if vc is not None:
            vc.fail(f"control connection lost: {reason}")
        else:
            self.agent.on_lost(conn, reason)

    async def stop(self) -> None:
        for vc in list(self.conns):
            vc.close("agent stopping")
        await super().stop()
        if self.dev is not None:
            self.dev.close()
            self.dev = None


class _Detached:
    """Stands in for a control connection handed back to plain TCP."""

    closed = False

    def close(self) -> None:
        pass
