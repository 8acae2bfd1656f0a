"""PostMark 1.5 (Katcher, NetApp TR3022) as an operation stream, for one or many clients.

PostMark is the benchmark the Federated DAFS paper measures with (section VI-A:
150 files and 30,000 transactions per client).  This module reproduces the
algorithm of PostMark 1.51-1.53 (the Debian ``postmark`` binary) step for
step, *including its random number generator*, so that for the same
parameters it makes the same decisions as the binary: the same file sizes,
names, choices of file, and so the same counts PostMark prints.  The test
(``tests/test_postmark.py``) runs the real binary and compares.

The algorithm (``cli_run`` in postmark-1.5x.c):

1. ``sgenrand(seed)``: Mersenne Twister MT19937 seeded by the 1999 ``sgenrand``
   (a Knuth LCG fills the state, not the later ``init_genrand``), and
   ``RND(x) = genrand() % x`` (no draw at all when ``x <= 0``).
2. A buffer of ``2 * size_high`` random printable bytes (``32 + RND(95)``)
   that every write copies from.
3. With ``subdirectories > 1``: mkdir ``s0 .. s{n-1}`` in the location.
4. The pool: ``number`` creates.  A create takes a free slot of a table of
   ``2 * number`` entries (the next slot if free, else the first hole), names
   the file ``[s{RND(subdirectories)}/]{++files_created}`` and gives it
   ``size_low + RND(size_high - size_low)`` bytes, written in blocks of
   ``write_block_size`` (then the remainder).
5. ``transactions`` transactions, each stopping early if every file is gone:
   ``RND(10) < bias_read`` ? read a used file : append to a used file; then
   ``RND(10) < bias_create`` ? create : delete a used file.  A bias of -1
   skips that half.  "A used file" is ``RND(2 * number)`` drawn until a slot
   holds a file.  A read reads the whole file in ``read_block_size`` blocks;
   an append (only of a file below ``size_high``, else nothing happens and
   nothing is drawn) adds ``RND(size_high - size) + 1`` bytes.
6. Delete every remaining file (slot order), then the subdirectories.

PostMark counts its bytes in single-precision ``float`` variables; the
report's megabytes are those sums, which is emulated (``Counts.report_data``)
beside the exact integer totals.

``buffering`` (PostMark's ``set buffering``) chooses stdio or raw ``read``/
``write``.  It changes no decision and no count, only the sizes of the
requests a file system sees: raw I/O issues PostMark's block sizes, stdio
issues ``STDIO_BUFFER``-byte requests (glibc's buffer is the file system's
``st_blksize``, 4 KiB on ext4; strace of the binary shows 4,096-byte writes and
reads with buffering, 512-byte ones and the remainder without);
:func:`io_sizes` gives either.
"""

from __future__ import annotations

import random
import re
import shutil
import struct
import subprocess
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, NonNegativeInt, PositiveInt, model_validator

from fedsim.protocol.names import join
from fedsim.schema import Strict

#: bytes per request when PostMark uses buffered (stdio) I/O: glibc's buffer size
STDIO_BUFFER = 4096
#: the MT19937 state size (words)
_MT_N = 624

OpKind = Literal["mkdir", "create", "read", "append", "delete", "rmdir"]
Phase = Literal["setup", "pool", "transactions", "cleanup"]


class PostMarkParams(Strict):
    """PostMark's configurable parameters, named (and defaulted) as its ``set``
    commands name them: ``set number``, ``set transactions``, ``set size LOW
    HIGH``, ``set subdirectories``, ``set read``, ``set write``, ``set bias
    read``, ``set bias create``, ``set buffering``, ``set seed``; refused where
    PostMark's CLI refuses them.  A config section too (``workload.postmark``
    extends it), so the names and limits are written once."""

    number: PositiveInt = 500
    transactions: PositiveInt = 500
    size_low: PositiveInt = 500
    size_high: PositiveInt = 10000
    subdirectories: NonNegativeInt = 0
    read_block_size: PositiveInt = 512
    write_block_size: PositiveInt = 512
    bias_read: int = Field(5, ge=-1, le=10)  # chance in 10 of a read over an append; -1: neither
    bias_create: int = Field(5, ge=-1, le=10)  # chance in 10 of a create over a delete; -1: neither
    buffering: bool = True
    seed: PositiveInt = 42

    @model_validator(mode="after")
    def _sizes(self) -> PostMarkParams:
        if self.size_high < self.size_low:
            raise ValueError(f"size_high ({self.size_high}) is below size_low ({self.size_low})")
        return self

    def commands(self, location: str) -> list[str]:
        """The PostMark CLI lines that configure the binary as these parameters
        say (then ``run``): what the validation test feeds ``postmark``."""
        return [
            f"set location {location}",
            f"set number {self.number}",
            f"set transactions {self.transactions}",
            f"set size {self.size_low} {self.size_high}",
            *([f"set subdirectories {self.subdirectories}"] if self.subdirectories else []),
            f"set read {self.read_block_size}",
            f"set write {self.write_block_size}",
            f"set bias read {self.bias_read}",
            f"set bias create {self.bias_create}",
            f"set buffering {'true' if self.buffering else 'false'}",
            f"set seed {self.seed}",
        ]


@dataclass(frozen=True, slots=True)
class Op:
    """One file operation of the stream.  ``size``: bytes written by a create
    or an append, read by a read (the whole file); ``offset``: where an append
    starts (the file's size before it).  ``slot`` is PostMark's file-table
    slot (what a driver may key open state on)."""

    kind: OpKind
    path: str
    phase: Phase
    size: int = 0
    offset: int = 0
    slot: int = -1


def _f32(x: float) -> float:
    """``x`` rounded to single precision, as a C ``float`` stores it."""
    return struct.unpack("f", struct.pack("f", x))[0]


@dataclass(slots=True)
class Counts:
    """What PostMark reports, computed as it computes it."""

    created_alone: int = 0  # the pool ("Creation alone")
    created_mixed: int = 0  # "Mixed with transactions"
    read: int = 0
    appended: int = 0
    deleted_mixed: int = 0
    deleted_alone: int = 0  # the final deletion ("Deletion alone")
    bytes_read: int = 0  # exact
    bytes_written: int = 0  # exact
    bytes_read_f32: float = 0.0  # PostMark's float accumulator
    bytes_written_f32: float = 0.0
    transactions_done: int = 0
    out_of_files: bool = False  # PostMark printed "out of files!" and no report

    @property
    def created(self) -> int:
        return self.created_alone + self.created_mixed

    @property
    def deleted(self) -> int:
        return self.deleted_alone + self.deleted_mixed

    def add_read(self, n: int) -> None:
        self.read += 1
        self.bytes_read += n
        self.bytes_read_f32 = _f32(self.bytes_read_f32 + n)

    def add_written(self, n: int) -> None:
        self.bytes_written += n
        self.bytes_written_f32 = _f32(self.bytes_written_f32 + n)

    def report_data(self) -> tuple[str, str]:
        """PostMark's two "Data:" amounts as it prints them (``scalef``)."""
        return _scalef(self.bytes_read_f32), _scalef(self.bytes_written_f32)

    def as_dict(self) -> dict[str, int]:
        return {
            "created": self.created,
            "created_alone": self.created_alone,
            "created_mixed": self.created_mixed,
            "read": self.read,
            "appended": self.appended,
            "deleted": self.deleted,
            "deleted_alone": self.deleted_alone,
            "deleted_mixed": self.deleted_mixed,
            "bytes_read": self.bytes_read,
            "bytes_written": self.bytes_written,
        }


def _scalef(v: float) -> str:
    mb, kb = 1024.0 * 1024.0, 1024.0
    if _f32(v / mb) > 1:
        return f"{_f32(v / mb):.2f} megabytes"
    if v / kb:
        return f"{_f32(v / kb):.2f} kilobytes"
    return f"{v:f} bytes"


class PostMarkRng:
    """PostMark's generator: MT19937 seeded by the 1999 ``sgenrand``.  Its
    outputs are the standard MT19937 tempered words, so CPython's own
    Mersenne Twister, given the state ``sgenrand`` builds, yields them
    (``getrandbits(32)`` returns one untouched word)."""

    def __init__(self, seed: int) -> None:
        mt = []
        s = seed & 0xFFFFFFFF
        for _ in range(_MT_N):
            hi = s & 0xFFFF0000
            s = (69069 * s + 1) & 0xFFFFFFFF
            mt.append(hi | ((s & 0xFFFF0000) >> 16))
            s = (69069 * s + 1) & 0xFFFFFFFF
        self._r = random.Random()
        self._r.setstate((3, (*mt, _MT_N), None))

    def rnd(self, x: int) -> int:
        """PostMark's ``RND(x)``: ``genrand() % x``, and 0 without a draw when ``x <= 0``."""
        return self._r.getrandbits(32) % x if x > 0 else 0


class PostMark:
    """One PostMark client: iterate :meth:`ops` for its operation stream;
    ``counts`` fills in as the stream is consumed (final when it ends).

    ``location`` is the client's directory (PostMark's ``set location``); it
    must exist before the first operation (PostMark does not create it)."""

    def __init__(self, params: PostMarkParams, location: str = "/") -> None:
        self.p = params
        self.location = location
        self.counts = Counts()
        self.source = b""  # PostMark's file_source: what every write copies from

    def _name(self, rng: PostMarkRng, serial: int) -> str:
        p = self.p
        if p.subdirectories > 1:
            return join(join(self.location, f"s{rng.rnd(p.subdirectories)}"), str(serial))
        return join(self.location, str(serial))

    def ops(self) -> Iterator[Op]:
        p, c = self.p, self.counts
        rng = PostMarkRng(p.seed)
        self.source = bytes(32 + rng.rnd(95) for _ in range(2 * p.size_high))
        slots = 2 * p.number
        size = [0] * slots  # 0 = free slot, as in PostMark's file_table
        names = [""] * slots
        allocated = 0  # PostMark's file_allocated
        serial = 0  # PostMark's files_created (names files)
        deleted = 0

        def free_slot() -> int:
            nonlocal allocated
            if allocated < slots and size[allocated] == 0:
                allocated += 1
                return allocated - 1
            for i in range(slots):
                if size[i] == 0:
                    allocated = i + 1
                    return i
            return -1

        def used_slot() -> int:
            while True:
                i = rng.rnd(slots)
                if size[i]:
                    return i

        def create(phase: Phase) -> Op | None:
            nonlocal serial
            i = free_slot()
            if i < 0:
                return None
            serial += 1
            names[i] = self._name(rng, serial)
            size[i] = p.size_low + rng.rnd(p.size_high - p.size_low)
            c.add_written(size[i])
            return Op("create", names[i], phase, size[i], 0, i)

        def delete(i: int, phase: Phase) -> Op:
            nonlocal deleted
            size[i] = 0
            deleted += 1
            return Op("delete", names[i], phase, slot=i)

        subdirs = [join(self.location, f"s{k}") for k in range(p.subdirectories)] if p.subdirectories > 1 else []
        for d in subdirs:
            yield Op("mkdir", d, "setup")
        for _ in range(p.number):
            op = create("pool")
            if op is not None:
                c.created_alone += 1
                yield op
        for _ in range(p.transactions):
            if serial == deleted:
                c.out_of_files = True
                break
            if p.bias_read != -1:
                if rng.rnd(10) < p.bias_read:
                    i = used_slot()
                    c.add_read(size[i])
                    yield Op("read", names[i], "transactions", size[i], 0, i)
                else:
                    i = used_slot()
                    if size[i] < p.size_high:
                        block = rng.rnd(p.size_high - size[i]) + 1
                        at = size[i]
                        size[i] += block
                        c.add_written(block)
                        c.appended += 1
                        yield Op("append", names[i], "transactions", block, at, i)
            if p.bias_create != -1:
                if rng.rnd(10) < p.bias_create:
                    op = create("transactions")
                    if op is not None:
                        c.created_mixed += 1
                        yield op
                else:
                    c.deleted_mixed += 1
                    yield delete(used_slot(), "transactions")
            c.transactions_done += 1
        for i in range(slots):
            if size[i]:
                c.deleted_alone += 1
                yield delete(i, "cleanup")
        for d in subdirs:
            yield Op("rmdir", d, "cleanup")


def run(params: PostMarkParams, location: str = "/") -> tuple[list[Op], Counts]:
    """The whole stream of one client and its counts."""
    pm = PostMark(params, location)
    ops = list(pm.ops())
    return ops, pm.counts


@dataclass(frozen=True, slots=True)
class Clients:
    """Many PostMark clients, each with its own file set: client ``i`` works in
    ``{prefix}{i}`` with seed ``params.seed + i * seed_step``.  (The paper ran
    copies of PostMark and does not say how they were seeded; copies left at
    the default seed would run in lock step, hence a step of 1 by default.)"""

    params: PostMarkParams
    clients: int = 1
    prefix: str = "/pm"
    seed_step: int = 1

    def __post_init__(self) -> None:
        if self.clients <= 0:
            raise ValueError(f"clients must be positive, got {self.clients}")

    def location(self, i: int) -> str:
        return f"{self.prefix}{i}"

    def client(self, i: int) -> PostMark:
        """A fresh PostMark for client ``i`` (its stream starts from the beginning)."""
        if not 0 <= i < self.clients:
            raise IndexError(f"client {i} of {self.clients}")
        seed = self.params.seed + i * self.seed_step
        return PostMark(self.params.model_copy(update={"seed": seed}), self.location(i))


def io_sizes(size: int, block: int, buffering: bool) -> list[int]:
    """The request sizes a file system sees for ``size`` bytes moved with
    PostMark's ``block`` size: raw I/O issues whole blocks then the remainder
    (PostMark's zero-byte remainder call moves nothing and is left out);
    stdio issues ``STDIO_BUFFER``-byte requests whatever the block size."""
    step = STDIO_BUFFER if buffering else block
    out = [step] * (size // step)
    if size % step:
        out.append(size % step)
    return out


Call = tuple[str, tuple[Any, ...]]


def op_calls(op: Op, pm: PostMark) -> Generator[Call, Any, None]:
    """The client API calls one PostMark operation becomes, as ``(name,
    args)``, each sent the call's value (``open``'s descriptor) or thrown its
    error; the one mapping of PostMark onto the federation's API, driven by
    the simulator here and by real clients (``experiments.postmark_agents``)."""
    p = pm.p
    if op.kind in ("mkdir", "rmdir"):
        yield op.kind, (op.path,)
        return
    if op.kind == "delete":
        yield "unlink", (op.path,)
        return
    if op.kind == "create":
        yield "create", (op.path,)
    fd = yield "open", (op.path,)
    try:
        offset = op.offset
        if op.kind == "read":
            for n in io_sizes(op.size, p.read_block_size, p.buffering):
                yield "read", (fd, offset, n)
                offset += n
        else:  # create or append: PostMark writes from the start of its source buffer
            at = 0
            for n in io_sizes(op.size, p.write_block_size, p.buffering):
                yield "write", (fd, offset, pm.source[at : at + n])
                offset += n
                at += n
    finally:
        yield "close", (fd,)


def run_op_sync(op: Op, pm: PostMark, call: Callable[[str, tuple[Any, ...]], Any]) -> None:
    """``op_calls`` driven by a blocking ``call(name, args)`` (a real client);
    an ``OSError`` of a call propagates after the descriptor is closed, as in
    the simulator."""
    calls = op_calls(op, pm)
    req = next(calls)
    while True:
        try:
            value = call(*req)
        except OSError as exc:
            req = calls.throw(exc)
            continue
        try:
            req = calls.send(value)
        except StopIteration:
            return


# ---------------------------------------------------------------------------- the real binary
def run_binary(params: PostMarkParams, where: str | Path) -> str:
    """Run the Debian ``postmark`` with ``params`` on the directory ``where``;
    its whole output.  It runs in ``where`` (so no stray ``.pmrc`` in the
    caller's directory is read); ``where`` should be short, since PostMark
    keeps a file's path in 81 bytes.  What the validation test and the demo's
    run on a FUSE mount both use."""
    binary = shutil.which("postmark")
    if binary is None:
        raise FileNotFoundError(
            "the postmark binary is not installed (Debian package 'postmark'; ./dev.sh installs it)"
        )
    script = "\n".join([*params.commands(str(where)), "run", "quit"]) + "\n"
    done = subprocess.run([binary], input=script, capture_output=True, text=True, errors="replace", cwd=where)
    if done.returncode != 0 or "Error" in done.stderr:
        said = done.stderr[-2000:] or done.stdout[-2000:]
        raise RuntimeError(f"postmark failed ({done.returncode}) on {where}: {said}")
    return done.stdout


_REPORT = re.compile(
    r"(?P<created>\d+) created .*?Creation alone: (?P<created_alone>\d+) files.*?"
    r"Mixed with transactions: (?P<created_mixed>\d+) files.*?"
    r"(?P<read>\d+) read .*?(?P<appended>\d+) appended .*?\d+ deleted .*?"
    r"Deletion alone: (?P<deleted_alone>\d+) files.*?Mixed with transactions: (?P<deleted_mixed>\d+) files.*?"
    r"Data:\s+(?P<data_read>[\d.]+ \w+) read .*?\n\s+(?P<data_written>[\d.]+ \w+) written",
    re.S,
)


def parse_report(out: str) -> dict[str, int | str]:
    """The counts of a PostMark report (the "N deleted" total line is not
    used: the Debian binary, v1.51, prints the number created there)."""
    m = _REPORT.search(out)
    if m is None:
        raise ValueError(f"no PostMark report in:\n{out[-2000:]}")
    return {k: v if k.startswith("data_") else int(v) for k, v in m.groupdict().items()}
