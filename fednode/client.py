"""Python API for programs that use a federation.

    from fednode.client import Client

    with Client("cluster.yaml") as fs:          # or Client(path, node=2)
        fs.mkdir("/data")
        fs.write_file("/data/x", b"hello")
        print(fs.readdir("/data"), fs.read_file("/data/x"))

A client talks to one agent (the requester of its operations, FedFS's
"node where the application runs") over an authenticated TCP connection
(TLS when the cluster file has ``tls:``).  It proves the client role's key,
so a client file (``fednode client-file``: no secret, only ``client_key``) is
all a program needs.
Failures are the ``OSError`` subclasses a file-system user expects
(``FileNotFoundError``, ``FileExistsError``, ``NotADirectoryError``,
``IsADirectoryError``, ``OSError`` with ``errno.ENOTEMPTY`` or ``EINVAL`` ...);
an agent or peer that does not answer is ``PeerUnavailable`` (a
``ConnectionError``, errno ``EHOSTDOWN``).

Blocking sockets rather than asyncio: a program using the API should not have
to run an event loop, and one request at a time per client needs none.  A
``Client`` may be shared by threads (calls are serialised by a lock).

Reconnection.  A connection that ended -- closed by the agent when idle for
``limits.idle_timeout_s``, by an agent that was killed or restarted, or given
up by this client after a failed call (no reply within the timeout, a broken
stream) -- is replaced by a new one at the start of the next call.  A request
is never sent twice: the call that may have reached the old agent raises
``PeerUnavailable``; only the calls after it go to the new connection.
Descriptors belong to the connection that opened them, and the agent numbers
them afresh when it restarts, so the numbers ``open`` returns carry the
connection they came from: a descriptor of an earlier connection is EBADF
here, never a file opened since under the same agent number.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import select
import socket
import ssl
import threading
from pathlib import Path
from typing import Any, NamedTuple

from fednode import wire
from fednode.config import Cluster, load_cluster
from fednode.transport.tcp import tls_contexts
from fedsim.protocol.attrs import KEEP, UTIME_NOW, UTIME_OMIT, Attr, StatFS, new_args
from fedsim.protocol.messages import PeerUnavailable, ProtocolError, decode_error, pack
from fedsim.protocol.names import join, normalize

CHUNK = 1 << 20  # bytes per read/write message: large enough for bandwidth, far below the frame limit
#: calls whose first argument is a descriptor
_FD_OPS = ("read", "write", "close", "fsync", "fgetattr", "fsetattr", "ftruncate")
_OPENS = ("open", "create_open")  # calls whose value is a descriptor, or begins with one
_GEN_SHIFT = 48  # a descriptor this client hands out: (connection number << 48) | the agent's number


class Stat(NamedTuple):
    is_dir: bool
    size: int


class Client:
    """A connection to one agent of a federation."""

    def __init__(self, cluster: Cluster | str | Path, node: int | None = None, timeout: float | None = None) -> None:
        self._setup(cluster, timeout)
        spec = self.cluster.spec
        self._tls = tls_contexts(self.cluster, server=False)
        #: the current connection (None after one ended, until the next call connects)
        self.sock: socket.socket | None = None
        candidates = [node] if node is not None else spec.members
        errors = []
        for n in candidates:
            try:
                self.sock = self._connect(n)
                self.node = n
                self._gen = 0
                break
            except PeerUnavailable as exc:
                errors.append(str(exc))
        else:
            raise PeerUnavailable(
                candidates[0] if len(candidates) == 1 else -1,
                "no agent answered: " + "; ".join(errors) + " (is the federation running? `fednode status`)",
            )

    def _setup(self, cluster: Cluster | str | Path, timeout: float | None) -> None:
        """What every kind of client holds, however it reaches its agent."""
        self.cluster = cluster if isinstance(cluster, Cluster) else load_cluster(cluster)
        spec = self.cluster.spec
        self.timeout = timeout if timeout is not None else 4 * spec.rpc_timeout_ms / 1000.0 + 1.0
        self.max_size = spec.max_message_bytes
        self.chunk = min(CHUNK, spec.max_io)  # the cluster file guarantees at least config.MIN_CHUNK
        self._rid = itertools.count(1)
        self._lock = threading.Lock()
        self._closed = False  # disconnect() was called: no call connects again
        self._gen = -1  # how many connections this client made, less one: the first's descriptors are the agent's

    # ------------------------------------------------------------------ connection
    def _connect(self, node: int) -> socket.socket:
        spec = self.cluster.spec.node(node)
        try:
            sock = socket.create_connection((spec.host, spec.port), timeout=self.cluster.spec.connect_timeout_ms / 1000)
        except OSError as exc:
            raise PeerUnavailable(node, f"cannot connect to {spec.host}:{spec.port}: {exc.strerror or exc}") from None
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._tls is not None:
                sock = self._tls.wrap_socket(sock, server_hostname=spec.host)
            key = self.cluster.key_for(wire.CLIENT_ID)
            challenge = self._recv(sock, wire.HANDSHAKE_MAX, node)
            hello, mine = wire.hello(key, challenge, wire.CLIENT_ID)
            sock.sendall(hello)
            wire.check_welcome(key, mine, self._recv(sock, wire.HANDSHAKE_MAX, node), wire.CLIENT_ID)
        except ssl.SSLError as exc:
            sock.close()
            raise PeerUnavailable(node, f"TLS with {spec.host}:{spec.port} failed: {exc}") from None
        except (OSError, wire.AuthError, ProtocolError) as exc:
            sock.close()
            raise PeerUnavailable(node, str(exc)) from None
        sock.settimeout(self.timeout)
        return sock

    def _recv(self, sock: socket.socket, limit: int, node: int) -> bytes:
        head = self._exact(sock, 4, node)
        n = wire.HEADER.unpack(head)[0]
        if n > limit:
            raise ProtocolError(f"agent sent a frame of {n} bytes (limit {limit})")
        return self._exact(sock, n, node)

    @staticmethod
    def _exact(sock: socket.socket, n: int, node: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = sock.recv(min(n - len(buf), 1 << 20))
            except TimeoutError:
                raise PeerUnavailable(node, "the agent did not answer within the timeout") from None
            except OSError as exc:
                raise PeerUnavailable(node, f"connection failed: {exc.strerror or exc}") from None
            if not chunk:
                raise PeerUnavailable(node, "the agent closed the connection")
            buf += chunk
        return bytes(buf)

    def disconnect(self) -> None:
        """Close the connection (the agent closes files this client left open)."""
        self._closed = True
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def _drop(self) -> None:
        """Give up the current connection after a failed call: its stream may
        hold half a frame or a late reply, so the next call starts a new one."""
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()
            self.sock = None

    def _ensure_connected(self) -> socket.socket:
        """The connection to use for the next request: the current one, or a
        new one if it ended (``PeerUnavailable`` if the agent does not answer;
        the next call tries again)."""
        sock = self.sock
        if sock is not None and not self._closed_by_agent(sock):
            return sock
        if self._closed:
            raise OSError(errno.EBADF, "this Client was disconnected (make a new one)")
        self._drop()  # files opened on it were closed with it by the agent
        sock = self.sock = self._connect(self.node)
        self._gen += 1
        return sock

    def _to_agent_fd(self, fd: Any) -> Any:
        """The agent's number for a descriptor of this client's; EBADF for one of an earlier connection."""
        if type(fd) is not int or fd < 0:
            return fd  # not a descriptor: the agent's type check answers
        gen, agent_fd = fd >> _GEN_SHIFT, fd & ((1 << _GEN_SHIFT) - 1)
        if gen != self._gen:
            raise OSError(
                errno.EBADF,
                f"descriptor {fd} was not opened on this connection (its connection to node {self.node} "
                "ended; open the file again)",
            )
        return agent_fd

    def _translate(self, op: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
        """Arguments with this client's descriptors replaced by the agent's
        (the file API's, and those inside a ``bench fedfs`` request's calls)."""
        if op in _FD_OPS and args:
            return (self._to_agent_fd(args[0]), *args[1:])
        if op == "bench" and len(args) >= 3 and args[0] == "fedfs" and args[1] in _FD_OPS:
            calls = args[2]
            if isinstance(calls, (list, tuple)):
                calls = [[self._to_agent_fd(c[0]), *c[1:]] if isinstance(c, (list, tuple)) and c else c for c in calls]
            return (args[0], args[1], calls, *args[3:])
        return args

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.disconnect()

    # ------------------------------------------------------------------ calls
    def call(self, op: str, *args: Any, trace: bool = False) -> Any:
        """Run ``op`` at the agent; its value, or its error raised here."""
        value, _ = self._call(op, args, trace)
        return value

    def traced(self, op: str, *args: Any) -> tuple[Any, list[tuple[int, int, str]]]:
        """``op``'s outcome (value, or the exception object) and every protocol
        message it caused, as (src, dst, kind) in causal order."""
        try:
            return self._call(op, args, True)
        except _Failed as f:
            return f.error, f.log

    def _closed_by_agent(self, sock: socket.socket) -> bool:
        """Whether the agent has closed this connection since the last reply
        (an idle client connection is closed after ``limits.idle_timeout_s``;
        a killed agent's kernel closes it too).  Checked before a request is
        sent, so a request is never sent twice."""
        if not select.select([sock], [], [], 0)[0]:
            return False  # nothing to read: open (a reply never arrives unasked)
        try:
            sock.settimeout(0)
            # readable while no request is out: EOF, or a close_notify under TLS (where MSG_PEEK is not allowed)
            data = sock.recv(1) if isinstance(sock, ssl.SSLSocket) else sock.recv(1, socket.MSG_PEEK)
        except (BlockingIOError, ssl.SSLWantReadError):
            return False
        except OSError:
            return True
        finally:
            with contextlib.suppress(OSError):
                sock.settimeout(self.timeout)
        return not data or isinstance(sock, ssl.SSLSocket)  # TLS: a byte consumed, the stream is out of step

    def _call(self, op: str, args: tuple[Any, ...], trace: bool) -> tuple[Any, list[tuple[int, int, str]]]:
        ok, body, log = self._exchange(((op, args),), trace)[0]
        if ok:
            return body, log
        if trace:
            raise _Failed(body, log)
        raise body

    def pipeline(self, *calls: tuple[str, tuple[Any, ...]]) -> list[Any]:
        """Several calls sent at once (one ``sendall``) and their replies read
        after: one round trip instead of ``len(calls)``.  The agent serves them
        concurrently, in no promised order, so only calls that do not depend on
        each other belong together (``open`` and ``getattr`` of one file).
        Each call's value, or its error (an ``OSError`` instance, returned, not
        raised: the caller decides what a partial failure means)."""
        return [body for _, body, _ in self._exchange(calls, False)]

    def _exchange(
        self, calls: tuple[tuple[str, tuple[Any, ...]], ...], trace: bool
    ) -> list[tuple[bool, Any, list[tuple[int, int, str]]]]:
        """Send ``calls`` in one write and wait for every reply: per call
        (succeeded, value or error, message log).  ``PeerUnavailable`` (the
        connection given up) if any reply does not come."""
        with self._lock:
            sock = self._ensure_connected()
            gen = self._gen
            frames = []
            rids: dict[int, int] = {}
            for i, (op, args) in enumerate(calls):
                rid = next(self._rid)
                rids[rid] = i
                data = pack((wire.CLIENT, rid, op, self._translate(op, args), trace))
                frames += (wire.HEADER.pack(len(data)), data)
            try:
                sock.sendall(b"".join(frames))
            except OSError as exc:
                self._drop()
                raise PeerUnavailable(self.node, f"send failed: {exc.strerror or exc}") from None
            envs: dict[int, tuple[Any, ...]] = {}
            try:
                while len(envs) < len(calls):
                    env = wire.decode(self._recv(sock, self.max_size, self.node), self.max_size)
                    if env[0] not in (wire.REPLY, wire.ERROR):
                        continue
                    if env[1] in rids:
                        envs[rids[env[1]]] = env
                    elif env[1] == 0:  # the agent could not read a frame: every call still out failed
                        for i in range(len(calls)):
                            envs.setdefault(i, env)
            except (PeerUnavailable, ProtocolError):
                self._drop()  # the requests may have run: not sent again, the next call connects anew
                raise
        return self._outcomes(calls, envs, gen)

    @staticmethod
    def _outcomes(
        calls: tuple[tuple[str, tuple[Any, ...]], ...], envs: dict[int, tuple[Any, ...]], gen: int
    ) -> list[tuple[bool, Any, list[tuple[int, int, str]]]]:
        """Per call, from its reply envelope (``envs[i]``: REPLY or ERROR): (succeeded,
        value or error, message log), a descriptor carrying connection ``gen``.
        One place for every way a reply reaches a client (a socket, or the
        agent's own process: ``fednode.serve.LocalClient``)."""
        out = []
        for i, (op, _) in enumerate(calls):
            kind, _, body, log = envs[i]
            log = [tuple(x) for x in log or ()]
            if kind == wire.REPLY and envs[i][1] != 0:
                if op in _OPENS:  # the connection's number travels with the descriptor
                    if type(body) is int and body >= 0:
                        body = (gen << _GEN_SHIFT) | body
                    elif type(body) in (list, tuple) and body and type(body[0]) is int and body[0] >= 0:
                        # (create_open's (fd, attributes): a tuple as decoded, and as built in-process)
                        body = ((gen << _GEN_SHIFT) | body[0], *body[1:])
                out.append((True, body, log))
            else:
                out.append((False, decode_error(body), log))
        return out

    # ------------------------------------------------------------------ the file API
    # A new name's mode and owner (-1, ``KEEP``: the home's default) are made with it, in the same
    # call.  The API has no notion of a calling user: whoever holds the cluster's client key chooses
    # them, as an NFS client with AUTH_SYS names its users; ``fednode mount`` passes the caller the
    # kernel authenticated.  Left out of the message when all are KEEP (the call older agents know).
    def create(self, path: str, mode: int = KEEP, uid: int = KEEP, gid: int = KEEP) -> int:
        """Create an empty file (exclusive), with permission bits ``mode`` and owner ``uid``/``gid``;
        returns the node that holds it."""
        return self.call("create", path, *new_args(mode, uid, gid))

    def mkdir(self, path: str, mode: int = KEEP, uid: int = KEEP, gid: int = KEEP) -> int:
        """Make a directory, with ``mode`` and owner ``uid``/``gid`` (as ``create``)."""
        return self.call("mkdir", path, *new_args(mode, uid, gid))

    def unlink(self, path: str) -> None:
        self.call("unlink", path)

    def rmdir(self, path: str) -> None:
        self.call("rmdir", path)

    def readdir(self, path: str) -> list[tuple[str, bool]]:
        """[(name, is_dir)] sorted by name: the union of the nodes' directories."""
        return list(self.call("readdir", path))

    def readdir_attrs(self, path: str) -> list[tuple[str, bool, Attr | None]]:
        """[(name, is_dir, attributes)] sorted by name: ``readdir`` with every
        entry's ``getattr``, for ``ls -l``, ``find -ls`` and a mount's
        readdirplus.  One call, and two round trips of the agent whatever the
        number of entries (the listing, then one batch per node holding
        entries, sent together), where readdir and a getattr per entry cost a
        round trip each.  A name removed meanwhile is left out; attributes are
        None when the entry's home or holders did not answer (a listing
        survives a dead member, as readdir's does)."""
        out = []
        for name, is_dir, a in self.call("readdir_attrs", path):
            out.append((name, is_dir, None if a is None else Attr(*a)))
        return out

    def symlink(self, target: str, path: str) -> int:
        """Make the symbolic link ``path`` holding ``target`` (``os.symlink``'s
        order); returns the node that holds it.  The target is stored verbatim
        and never resolved by the federation (a mount's kernel follows it):
        any string of at most 4095 bytes without NUL.  EEXIST if the name exists."""
        return self.call("symlink", target, path)

    def readlink(self, path: str) -> str:
        """A symbolic link's target; EINVAL for anything that is not one."""
        return self.call("readlink", path)

    def link(self, old: str, new: str) -> int:
        """Make ``new`` a hard link to the file ``old`` (``os.link``'s order): one
        more name of the same file, on the same node (returned), with the same
        inode number; ``nlink`` counts the names.  EEXIST if ``new`` exists,
        ENOENT if ``old`` does not, EPERM for a directory, or where the
        federation keeps no hard links (``replicas: 2``, the block cache)."""
        return self.call("link", old, new)

    def mknod(self, path: str, mode: int, dev: int = 0, uid: int = KEEP, gid: int = KEEP) -> int:
        """Make a fifo, socket or device (``mode``: ``stat.S_IFIFO``, ``S_IFSOCK``,
        ``S_IFCHR`` or ``S_IFBLK`` and the permission bits; ``dev`` a device's
        number, ``os.makedev``) owned by ``uid``/``gid`` (the caller's; KEEP:
        the agent's user); returns its home.  Never opened by an agent (open
        is ELOOP): a mount's kernel does a node's I/O itself.  A device is EPERM
        unless ``uid`` is 0 and the cluster file says ``protocol.devices: true``."""
        if uid == KEEP and gid == KEEP:
            return self.call("mknod", path, mode, dev)
        return self.call("mknod", path, mode, dev, uid, gid)

    def listdir(self, path: str) -> list[str]:
        return [name for name, _ in self.readdir(path)]

    def stat(self, path: str) -> Stat:
        return Stat(*self.call("stat", path))

    def getattr(self, path: str) -> Attr:
        """Every attribute of ``path`` (``fedsim.protocol.attrs.Attr``): a file's
        at its home; a directory's at the lowest-numbered node holding it, with
        nlink 1 ("unknown"); ``ino`` is the same from every node and stays."""
        return Attr(*self.call("getattr", path))

    def chmod(self, path: str, mode: int) -> None:
        """Set the permission bits (0..0o7777) of a file, or of a directory at every node holding it."""
        self.call("setattr", path, mode, KEEP, KEEP, UTIME_OMIT, UTIME_OMIT)

    def chown(self, path: str, uid: int, gid: int) -> None:
        """Set the owner and group (-1 leaves one unchanged); EPERM where the
        holding agent may not (an agent that is not root can give nothing away)."""
        self.call("setattr", path, KEEP, uid, gid, UTIME_OMIT, UTIME_OMIT)

    def utimens(self, path: str, atime_ns: int = UTIME_NOW, mtime_ns: int = UTIME_NOW) -> None:
        """Set the access and modification times in ns since the epoch;
        ``UTIME_NOW`` is the holding node's clock, ``UTIME_OMIT`` leaves one."""
        self.call("setattr", path, KEEP, KEEP, KEEP, atime_ns, mtime_ns)

    # Extended attributes (``fedsim.protocol.xattrs``: ``user.``; ``trusted.`` for a caller ``uid``
    # 0; ``security.`` where the federation serves it; EOPNOTSUPP for others).  ``uid`` is the
    # caller's (KEEP names none, and is not root).  A file's live at its home, a directory's are
    # read at the holder getattr answers from and changed at every holder: one call each.
    def getxattr(self, path: str, name: str, size: int | None = None, uid: int = KEEP) -> bytes:
        """The value of extended attribute ``name`` (ENODATA if unset).  With
        ``size``, as ``getxattr(2)`` with a buffer of that many bytes: ERANGE
        if the value is longer (size 0 asks only for the length: the value is
        returned whole, len() is the answer).  The protocol always carries the
        whole value (at most 64 KiB: one message), so the buffer is checked here."""
        value = self.call("getxattr", path, name, *_caller(uid))
        if size and len(value) > size:
            raise OSError(errno.ERANGE, f"value of {len(value)} bytes, buffer of {size}", path)
        return value

    def setxattr(self, path: str, name: str, value: bytes, flags: int = 0, uid: int = KEEP) -> None:
        """Set ``name`` to ``value`` (at most 64 KiB; E2BIG beyond); ``flags``
        ``os.XATTR_CREATE`` fails with EEXIST if it is set, ``os.XATTR_REPLACE``
        with ENODATA if it is not.  A directory's is set at every node holding it."""
        self.call("setxattr", path, name, bytes(value), flags, *_caller(uid))

    def listxattr(self, path: str, uid: int = KEEP) -> list[str]:
        """The names of ``path``'s extended attributes the caller sees, sorted."""
        return list(self.call("listxattr", path, *_caller(uid)))

    def removexattr(self, path: str, name: str, uid: int = KEEP) -> None:
        """Remove ``name`` (ENODATA if unset); a directory's at every node holding it."""
        self.call("removexattr", path, name, *_caller(uid))

    def statfs(self) -> StatFS:
        """The federation's size and free space: every member's local file
        system summed (members that do not answer are left out)."""
        return StatFS(*self.call("statfs"))

    def fsync(self, fd: int) -> None:
        """Flush an open file's data and metadata to stable storage at its home."""
        self.call("fsync", fd)

    # By descriptor: the open file whatever its name now, one unlinked or renamed over while
    # open too (at any node: the protocol keeps it for its descriptors until their last close).
    def fgetattr(self, fd: int) -> Attr:
        """``fstat``: the open file's attributes (a file unlinked while open has link count 0)."""
        return Attr(*self.call("fgetattr", fd))

    def fchmod(self, fd: int, mode: int) -> None:
        self.call("fsetattr", fd, mode, KEEP, KEEP, UTIME_OMIT, UTIME_OMIT)

    def fchown(self, fd: int, uid: int, gid: int) -> None:
        self.call("fsetattr", fd, KEEP, uid, gid, UTIME_OMIT, UTIME_OMIT)

    def futimens(self, fd: int, atime_ns: int = UTIME_NOW, mtime_ns: int = UTIME_NOW) -> None:
        self.call("fsetattr", fd, KEEP, KEEP, KEEP, atime_ns, mtime_ns)

    def ftruncate(self, fd: int, size: int) -> None:
        """Cut the open file to ``size`` bytes or extend it with zeros."""
        self.call("ftruncate", fd, size)

    def exists(self, path: str) -> bool:
        try:
            self.stat(path)
        except FileNotFoundError:
            return False
        return True

    def open(self, path: str) -> int:
        return self.call("open", path)

    def create_open(self, path: str, mode: int = KEEP, uid: int = KEEP, gid: int = KEEP) -> tuple[int, Attr | None]:
        """Create a file (exclusive) with ``mode`` and owner ``uid``/``gid`` (as ``create``),
        open it and read its attributes, in one round trip."""
        fd, attr = self.call("create_open", path, *new_args(mode, uid, gid))
        return fd, None if attr is None else Attr(*attr)

    def close(self, fd: int) -> None:
        """Close a file descriptor from ``open`` (``disconnect`` ends the connection)."""
        self.call("close", fd)

    def read(self, fd: int, size: int, offset: int = 0) -> bytes:
        """Up to ``size`` bytes at ``offset`` (fewer at the end of the file).

        A part shorter than asked is the end of the file (the home's ``pread`` of
        a regular file returns fewer bytes only there), so no further round trip
        asks for the nothing after it: a small file is one call, not two."""
        out = bytearray()
        while len(out) < size:
            want = min(self.chunk, size - len(out))
            part = self.call("read", fd, offset + len(out), want)
            out += part
            if len(part) < want:
                break
        return bytes(out)

    def write(self, fd: int, data: bytes, offset: int = 0) -> int:
        view = memoryview(data)
        done = 0
        while done < len(view):
            done += self.call("write", fd, offset + done, bytes(view[done : done + self.chunk]))
        return done

    # ------------------------------------------------------------------ conveniences
    def read_file(self, path: str) -> bytes:
        fd = self.open(path)
        try:
            return self.read(fd, self.stat(path).size)
        finally:
            self.close(fd)

    def truncate(self, path: str, size: int) -> int:
        """Cut a file to ``size`` bytes or extend it with zeros; returns the node that holds it."""
        return self.call("truncate", path, size)

    def write_file(self, path: str, data: bytes, overwrite: bool = False) -> int:
        """Create ``path`` with ``data``; returns the node that holds it.

        With ``overwrite`` an existing file is replaced in place: opened, cut
        to nothing and written, so readers never find the name missing (as
        they would between an unlink and a create); it keeps its home."""
        try:
            home = self.create(path)
        except FileExistsError:
            if not overwrite:
                raise
            home = None
        fd = self.open(path)  # EISDIR for a directory
        try:
            if home is None:
                home = self.truncate(path, 0)
            self.write(fd, data)
        finally:
            self.close(fd)
        return home

    def rename(self, old: str, new: str) -> None:
        """Rename a file (a symlink, a special file) atomically: every observer
        sees either name, never both nor neither, and an existing target is
        replaced.  Within its directory, and into another one with the
        federation's ``rename: 2pc`` (the default: two-phase commit between
        both directories' managers) or ``redistribute`` (the target
        directory's manager borrows the source's; the file's data stays at
        its home either way).
        ``OSError(EXDEV)`` for directories (copy them) and, with ``rename:
        local``, across directories; ``ENOENT`` if ``old`` or ``new``'s
        directory is missing; ``EISDIR`` onto a directory; ``EBUSY`` while
        either file is open anywhere."""
        self.call("rename", old, new)

    def migrate(self, path: str, to: int) -> int:
        """Move a file, or every file under a directory, to node ``to`` (FedFS
        3.2); returns how many files moved (0: already there).  The names and
        contents stay; open descriptors follow.  ``OSError(EINVAL)`` if ``to``
        is not a member, ``PeerUnavailable`` if it is down."""
        return self.call("migrate", path, to)

    def walk(self, top: str = "/") -> dict[str, bytes | None]:
        """The whole namespace under ``top``: path -> content (None for directories)."""
        top = normalize(top)
        out: dict[str, bytes | None] = {top: None}
        stack = [top]
        while stack:
            d = stack.pop()
            for name, is_dir in self.readdir(d):
                p = join(d, name)
                if is_dir:
                    out[p] = None
                    stack.append(p)
                else:
                    out[p] = self.read_file(p)
        return out

    def status(self) -> dict[str, Any]:
        return self.call("status")


class ClientPool:
    """Clients of every agent of a federation, and the route that picks which
    agent serves an operation (Federated DAFS VI-B, ``fedsim.protocol.routing``,
    the same ``Router`` the simulator's PostMark driver uses): with
    ``route="hash"`` an operation on a path goes to the path's manager, its
    home under ``with_manager`` placement, so its accesses are local there.
    ``client`` numbers this program among the federation's clients (the start
    of its round-robin turn, its random stream).  Route once per file
    operation: a descriptor belongs to the agent that opened it."""

    def __init__(
        self, cluster: Cluster | str | Path, route: str = "hash", client: int = 0, timeout: float | None = None
    ) -> None:
        from fedsim.protocol.routing import Router

        self.cluster = cluster if isinstance(cluster, Cluster) else load_cluster(cluster)
        self.router = Router(route, self.cluster.spec.federation())
        self.client = client
        self.timeout = timeout
        self._clients: dict[int, Client] = {}

    def entry(self, path: str) -> int:
        """The agent this pool sends an operation on ``path`` to."""
        return self.router.entry(self.client, normalize(path))

    def for_path(self, path: str) -> Client:
        """The client connected to ``entry(path)`` (made on first use)."""
        return self.at(self.entry(path))

    def at(self, node: int) -> Client:
        """The client connected to agent ``node`` (made on first use)."""
        c = self._clients.get(node)
        if c is None:
            c = self._clients[node] = Client(self.cluster, node=node, timeout=self.timeout)
        return c

    def close(self) -> None:
        for c in self._clients.values():
            c.disconnect()
        self._clients.clear()

    def __enter__(self) -> ClientPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["KEEP", "UTIME_NOW", "UTIME_OMIT", "Attr", "Client", "ClientPool", "Stat", "StatFS"]


class _Failed(Exception):
    def __init__(self, error: OSError, log: list[tuple[int, int, str]]) -> None:
        super().__init__(str(error))
        self.error = error
        self.log = log


def _caller(uid: int) -> tuple[int, ...]:
    """The optional caller argument of an xattr call: none for KEEP (the request as before)."""
    return () if uid == KEEP else (uid,)
