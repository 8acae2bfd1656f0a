"""Bloom-filter summaries of a node's directory tree (FedFS paper, section 2.2).

Why a summary at all
    A *dirmerge* builds a virtual directory by sending ``readdir`` to every node
    that may hold that directory locally.  Broadcasting to the whole cluster does
    not scale, so each node ships a compact summary of its directory tree to the
    others, and the manager contacts only the nodes whose summary says "maybe".

Why a Bloom filter
    A Bloom filter never gives a false negative: a node that holds the directory
    always answers "maybe", so a dirmerge guided by summaries never misses a
    node.  Its only error is the false positive, which costs one useless
    ``readdir`` -- a performance cost, never a correctness one.

Why directories only
    A dirmerge asks "which nodes have directory D?"; files are found through
    their parent's virtual directory, so they never need to be in the summary.
    Directories are also far fewer than files and change far less often, so a
    fixed-size summary of directories stays accurate (few keys per bit) and
    rarely needs re-sending: creating a file never touches it.

Why deletions only add false positives
    A plain Bloom filter cannot remove a key (clearing a bit could erase other
    keys that share it, i.e. create false negatives, which dirmerge must never
    see).  So a deleted directory simply stays in the summary: the manager may
    send one extra ``readdir`` that returns nothing.  Creating a directory only
    sets bits, which is why an update can be sent to the one manager concerned
    instead of rebuilding and broadcasting the whole summary; a periodic rebuild
    reclaims the bits of deleted directories.

Layouts
    The paper gives "2^20 bits" and k hash functions but not how the bits are
    arranged, and the arrangement decides the error rate, so it is explicit here:

    * ``"shared"`` -- one array of ``bits`` bits, all k hashes index it (the
      textbook filter).
    * ``"per_hash"`` -- k independent arrays of ``bits`` bits each; hash i indexes
      array i (k * bits bits in all).
    * ``"partitioned"`` -- one array of ``bits`` bits cut into k slices of
      ``bits // k`` bits; hash i indexes slice i (pybloom-live's layout).  When k
      does not divide ``bits`` the last ``bits % k`` bits are never used.

Hashing
    MurmurHash3 x64-128 (:func:`mmh3.hash64`) of the key's UTF-8 bytes gives two
    64-bit values h1, h2; hash i is ``(h1 + i*h2) mod size`` (Kirsch and
    Mitzenmacher's double hashing, which keeps the asymptotic false-positive rate
    of k independent hashes).  Python's ``hash()`` is salted per process, so it
    would make summaries built on different nodes incomparable; MurmurHash3 with
    a fixed seed gives the same bits on every node, every run.

Collisions
    :meth:`BloomSummary.add` reports whether all k bits of the key were already
    set before it was inserted.  For a key not inserted before, that is exactly a
    false positive of the filter as it stood, which is what the paper counts as a
    "collision" among valid keys.

This module is protocol code: it imports only the standard library, numpy and
mmh3, and does no I/O.
"""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Iterable, Sequence
from typing import Final, Literal, Self

import mmh3
import numpy as np
import numpy.typing as npt

__all__ = [
    "LAYOUTS",
    "MAX_HASHES",
    "MAX_TOTAL_BITS",
    "BloomSummary",
    "Layout",
    "expected_collisions",
    "expected_fp_rate",
]

Layout = Literal["shared", "per_hash", "partitioned"]
LAYOUTS: Final[tuple[str, ...]] = ("shared", "per_hash", "partitioned")

#: Upper bound on k; far beyond any useful filter (the optimum is ~0.7 * bits/key).
MAX_HASHES: Final = 256
#: Upper bound on the total number of bits (2^48 bits = 32 TiB): anything larger is a
#: mistake, and the bound keeps all bit positions exact in int64/uint64 arithmetic.
MAX_TOTAL_BITS: Final = 1 << 48

_HASH_SEED: Final = 0
_MAGIC: Final = b"FBSM"
_VERSION: Final = 1
# magic, version, layout code, reserved (0), bits, hashes, count
_HEADER: Final = struct.Struct("<4sBBHQIQ")
_TRAILER: Final = struct.Struct("<I")  # CRC-32 of header + packed bits
_LAYOUT_CODES: Final[dict[str, int]] = {name: code for code, name in enumerate(LAYOUTS)}
_CHUNK: Final = 1 << 20


def _check_geometry(bits: object, hashes: object, layout: object) -> tuple[int, int, str]:
    """Validate a geometry and return it as (bits, hashes, layout)."""
    for name, value in (("bits", bits), ("hashes", hashes)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    bits, hashes = int(bits), int(hashes)  # type: ignore[call-overload]
    if not isinstance(layout, str) or layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}: allowed layouts are {', '.join(LAYOUTS)}")
    if bits <= 0:
        raise ValueError(f"bits must be a positive integer (> 0), got {bits}")
    if hashes <= 0:
        raise ValueError(f"hashes must be a positive integer (> 0), got {hashes}")
    if hashes > MAX_HASHES:
        raise ValueError(f"hashes must be at most {MAX_HASHES}, got {hashes}")
    if layout == "partitioned" and bits < hashes:
        raise ValueError(
            f"layout 'partitioned' splits bits into one slice per hash, so it needs "
            f"bits >= hashes; got bits={bits} < hashes={hashes}"
        )
    total = _total_bits(bits, hashes, layout)
    if total > MAX_TOTAL_BITS:
        raise ValueError(
            f"geometry bits={bits}, hashes={hashes}, layout={layout!r} needs {total} bits; "
            f"at most {MAX_TOTAL_BITS} (2^48) are allowed"
        )
    return bits, hashes, layout


def _total_bits(bits: int, hashes: int, layout: str) -> int:
    """Memory of a geometry in bits: k arrays for per_hash, one array otherwise."""
    return bits * hashes if layout == "per_hash" else bits


def _index_range(bits: int, hashes: int, layout: str) -> int:
    """Number of positions one hash function can address."""
    return bits // hashes if layout == "partitioned" else bits


def _encode(key: object) -> bytes:
    if not isinstance(key, str):
        raise TypeError(f"summary keys are str pathnames, got {type(key).__name__} {key!r}")
    # surrogatepass: os.fsdecode()d names with undecodable bytes still hash
    # deterministically instead of raising; identical to UTF-8 for all other text.
    return key.encode("utf-8", "surrogatepass")


def _hash_pair(key: object) -> tuple[int, int]:
    return mmh3.hash64(_encode(key), seed=_HASH_SEED, x64arch=True, signed=False)


# The last (key, geometry, probes) of BloomSummary._probes: one slot, replaced
# whole, so a reader never sees a key with another key's probes.
_PROBE_MEMO: list[tuple[str, tuple[int, int, int], tuple[tuple[int, int], ...]] | None] = [None]


def _hash_pairs(keys: Sequence[object]) -> npt.NDArray[np.uint64]:
    """(n, 2) array of the two unsigned 64-bit MurmurHash3 halves of each key."""
    n = len(keys)
    flat = np.fromiter((half for key in keys for half in _hash_pair(key)), dtype=np.uint64, count=2 * n)
    return flat.reshape(n, 2)


def _check_count(n: object, what: str = "n") -> int:
    if isinstance(n, bool) or not isinstance(n, int | np.integer):
        raise TypeError(f"{what} must be an int, got {type(n).__name__} {n!r}")
    if n < 0:
        raise ValueError(f"{what} must be >= 0, got {n}")
    return int(n)


def _fp_rates(n: npt.NDArray[np.float64], bits: int, hashes: int, layout: str) -> npt.NDArray[np.float64]:
    """Theoretical false-positive rate after each insertion count in ``n``.

    Every layout is "k arrays/ranges, each hit by ``draws`` uniform draws per key":
    a bit of a range of ``size`` positions is still clear after n keys with
    probability (1 - 1/size)^(draws*n); a query is a false positive when all k
    probed bits are set.
    """
    size = _index_range(bits, hashes, layout)
    draws = hashes if layout == "shared" else 1
    if size == 1:
        fill = (n > 0).astype(np.float64)
    else:
        fill = -np.expm1(draws * n * math.log1p(-1.0 / size))
    return fill**hashes


def expected_fp_rate(n: int, bits: int, hashes: int, layout: str = "shared") -> float:
    """Theoretical probability that a key never inserted tests positive after n keys.

    * shared: (1 - (1 - 1/m)^(k n))^k  ~= (1 - e^(-k n / m))^k
    * partitioned: (1 - (1 - 1/(m/k))^n)^k  (k slices of m//k bits)
    * per_hash: (1 - (1 - 1/m)^n)^k  (k arrays of m bits)

    With the same ``bits``, per_hash has k times the memory of the other two, and
    its rate equals that of a shared filter of k*m bits.
    """
    bits, hashes, layout = _check_geometry(bits, hashes, layout)
    n = _check_count(n)
    return float(_fp_rates(np.array([n], dtype=np.float64), bits, hashes, layout)[0])


def expected_collisions(n: int, bits: int, hashes: int, layout: str = "shared") -> float:
    """Expected number of n distinct keys whose k bits were all set before insertion.

    Key i (0-based) collides exactly when it would have been a false positive of
    the filter holding the i keys before it, so the expectation is
    ``sum(expected_fp_rate(i, ...) for i in range(n))``.
    """
    bits, hashes, layout = _check_geometry(bits, hashes, layout)
    n = _check_count(n)
    total = 0.0
    for start in range(0, n, _CHUNK):
        i = np.arange(start, min(n, start + _CHUNK), dtype=np.float64)
        total += float(_fp_rates(i, bits, hashes, layout).sum())
    return total


class BloomSummary:
    """A Bloom filter over directory pathnames with an explicit geometry.

    ``BloomSummary(bits, hashes, layout)``; see the module docstring for the
    layouts.  Bad geometry raises ``ValueError`` (``TypeError`` for non-ints).
    Keys are ``str`` pathnames.  Only insertion is supported: see the module
    docstring for why deletions are left to a rebuild.
    """

    __slots__ = (
        "_array",
        "_bits",
        "_count",
        "_hashes",
        "_layout",
        "_size",
        "_stride",
        "_used",
    )
    __hash__ = None  # type: ignore[assignment]  # mutable

    def __init__(self, bits: int, hashes: int, layout: str = "shared") -> None:
        self._bits, self._hashes, self._layout = _check_geometry(bits, hashes, layout)
        self._size = _index_range(self._bits, self._hashes, self._layout)
        # offset between the ranges of hash i and hash i+1 (0: all share one range)
        self._stride = 0 if self._layout == "shared" else self._size
        self._used = self._size if self._layout == "shared" else self._size * self._hashes
        # little bit order: bit p lives in byte p >> 3 at bit p & 7
        self._array = np.zeros((self.total_bits + 7) // 8, dtype=np.uint8)
        self._count = 0

    # -- geometry -----------------------------------------------------------------
    @property
    def bits(self) -> int:
        """Bits per array (shared, per_hash) or of the whole array (partitioned)."""
        return self._bits

    @property
    def hashes(self) -> int:
        """Number of hash functions k."""
        return self._hashes

    @property
    def layout(self) -> str:
        return self._layout

    @property
    def total_bits(self) -> int:
        """Memory of the filter in bits: k*bits for per_hash, bits otherwise."""
        return _total_bits(self._bits, self._hashes, self._layout)

    @property
    def count(self) -> int:
        """Number of insertions (add calls, keys given to add_many, summed by union).

        Repeated keys count each time, so this is an upper bound on distinct keys.
        """
        return self._count

    # -- hashing ------------------------------------------------------------------
    def _positions(self, key: str) -> list[int]:
        h1, h2 = _hash_pair(key)
        size, stride = self._size, self._stride
        a, b = h1 % size, h2 % size
        return [i * stride + (a + i * b) % size for i in range(self._hashes)]

    def _probes(self, key: str) -> tuple[tuple[int, int], ...]:
        """(byte index, bit mask) of each of ``key``'s bit positions.

        A dirmerge tests one directory against every member's summary (1,024
        at 1,024 nodes), all of one geometry: the last answer is kept, so the
        key is hashed once per merge instead of once per summary."""
        memo = _PROBE_MEMO[0]
        geometry = (self._size, self._stride, self._hashes)
        if memo is not None and memo[0] == key and memo[1] == geometry:
            return memo[2]
        probes = tuple((p >> 3, 1 << (p & 7)) for p in self._positions(key))
        _PROBE_MEMO[0] = (key, geometry, probes)
        return probes

    def _positions_many(self, keys: Sequence[str]) -> npt.NDArray[np.int64]:
        """(n, k) bit positions; row j equals ``self._positions(keys[j])``."""
        h = _hash_pairs(keys)
        size = np.uint64(self._size)
        a = h[:, 0] % size
        b = h[:, 1] % size
        out = np.empty((len(keys), self._hashes), dtype=np.int64)
        cur = a
        for i in range(self._hashes):
            out[:, i] = cur.astype(np.int64) + i * self._stride
            # (a + (i+1) b) mod size, stepwise: cur + b < 2*size never overflows
            cur = (cur + b) % size
        return out

    def _test(self, pos: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        shift = (pos & 7).astype(np.uint8)
        return ((self._array[pos >> 3] >> shift) & 1).astype(np.bool_)

    # -- insertion ----------------------------------------------------------------
    def add(self, key: str) -> bool:
        """Insert ``key``; return True if all its k bits were already set (a collision)."""
        arr = self._array
        pos = self._positions(key)
        already = all((int(arr[p >> 3]) >> (p & 7)) & 1 for p in pos)
        for p in pos:
            arr[p >> 3] |= 1 << (p & 7)
        self._count += 1
        return already

    def add_many(self, keys: Iterable[str]) -> npt.NDArray[np.bool_]:
        """Insert keys in order; element j is what ``add(keys[j])`` would have returned.

        Vectorised: bit p counts as already set for key j when it was set before
        the call or some earlier key of this batch (index < j) sets it.
        """
        if isinstance(keys, str):
            raise TypeError("add_many takes a sequence of keys, not a single str")
        keys = keys if isinstance(keys, Sequence) else list(keys)
        n, k = len(keys), self._hashes
        if n == 0:
            return np.zeros(0, dtype=np.bool_)
        flat = self._positions_many(keys).ravel()
        before = self._test(flat)
        # first occurrence in row-major order = smallest key index touching each bit
        uniq, first, inverse = np.unique(flat, return_index=True, return_inverse=True)
        first_key = first // k
        key_index = np.repeat(np.arange(n, dtype=np.int64), k)
        already = before | (first_key[inverse.ravel()] < key_index)
        self._set(uniq)
        self._count += n
        return already.reshape(n, k).all(axis=1)

    def _set(self, sorted_unique_pos: npt.NDArray[np.int64]) -> None:
        byte = sorted_unique_pos >> 3
        mask = (np.uint8(1) << (sorted_unique_pos & 7).astype(np.uint8)).astype(np.uint8)
        starts = np.flatnonzero(np.r_[True, byte[1:] != byte[:-1]])
        self._array[byte[starts]] |= np.bitwise_or.reduceat(mask, starts)

    # -- queries ------------------------------------------------------------------
    def may_contain(self, key: str) -> bool:
        """False means "certainly not inserted"; True means "inserted, or a false positive"."""
        item = self._array.item
        for byte, mask in self._probes(key):
            if not item(byte) & mask:
                return False
        return True

    def __contains__(self, key: object) -> bool:
        return self.may_contain(key)  # type: ignore[arg-type]

    def contains_many(self, keys: Iterable[str]) -> npt.NDArray[np.bool_]:
        """Vectorised :meth:`may_contain` over ``keys``."""
        if isinstance(keys, str):
            raise TypeError("contains_many takes a sequence of keys, not a single str")
        keys = keys if isinstance(keys, Sequence) else list(keys)
        if len(keys) == 0:
            return np.zeros(0, dtype=np.bool_)
        pos = self._positions_many(keys)
        return self._test(pos.ravel()).reshape(pos.shape).all(axis=1)

    def fill_ratio(self) -> float:
        """Fraction of the bits the hashes can reach that are set.

        Unreachable tail bits of a partitioned filter (bits % k) are not counted.
        """
        ones = int(np.unpackbits(self._array).sum(dtype=np.int64))
        return ones / self._used

    def expected_fp_rate(self, n: int | None = None) -> float:
        """Theoretical false-positive rate of this geometry after n keys (default: count)."""
        return expected_fp_rate(self._count if n is None else n, self._bits, self._hashes, self._layout)

    # -- combination and copies -----------------------------------------------------
    def _geometry(self) -> tuple[int, int, str]:
        return (self._bits, self._hashes, self._layout)

    def _check_same_geometry(self, other: object) -> BloomSummary:
        if not isinstance(other, BloomSummary):
            raise TypeError(f"can only combine with a BloomSummary, got {type(other).__name__}")
        if other._geometry() != self._geometry():
            raise ValueError(
                "union needs summaries of the same geometry: "
                f"bits={self._bits}, hashes={self._hashes}, layout={self._layout!r} vs "
                f"bits={other._bits}, hashes={other._hashes}, layout={other._layout!r}"
            )
        return other

    def update(self, other: BloomSummary) -> Self:
        """In-place union: afterwards every key of either summary tests positive."""
        other = self._check_same_geometry(other)
        np.bitwise_or(self._array, other._array, out=self._array)
        self._count += other._count
        return self

    def union(self, other: BloomSummary) -> BloomSummary:
        """New summary holding the keys of both (same geometry, else ValueError)."""
        return self.copy().update(other)

    def __or__(self, other: object) -> BloomSummary:
        if not isinstance(other, BloomSummary):
            return NotImplemented
        return self.union(other)

    def __ior__(self, other: object) -> Self:
        if not isinstance(other, BloomSummary):
            return NotImplemented
        return self.update(other)

    def copy(self) -> BloomSummary:
        new = BloomSummary(self._bits, self._hashes, self._layout)
        new._array[:] = self._array
        new._count = self._count
        return new

    def __copy__(self) -> BloomSummary:
        return self.copy()

    def __deepcopy__(self, memo: dict[int, object]) -> BloomSummary:
        return self.copy()

    def __reduce__(self) -> tuple[object, tuple[bytes]]:
        return (BloomSummary.from_bytes, (self.to_bytes(),))

    def __eq__(self, other: object) -> bool:
        """Same geometry, same bits and same count (i.e. equal ``to_bytes()``)."""
        if not isinstance(other, BloomSummary):
            return NotImplemented
        return (
            self._geometry() == other._geometry()
            and self._count == other._count
            and bool(np.array_equal(self._array, other._array))
        )

    def __repr__(self) -> str:
        return (
            f"BloomSummary(bits={self._bits}, hashes={self._hashes}, layout={self._layout!r}, "
            f"count={self._count}, fill={self.fill_ratio():.4f})"
        )

    # -- wire format ----------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """Serialise: header, packed bits (little bit order), CRC-32.

        Header (little endian): magic b"FBSM", version u8, layout u8 (0 shared,
        1 per_hash, 2 partitioned), reserved u16 = 0, bits u64, hashes u32,
        count u64.  The packed bits take ceil(total_bits / 8) bytes; the CRC-32
        covers header and bits, so a summary garbled in transit is rejected rather
        than silently turned into false negatives.
        """
        header = _HEADER.pack(
            _MAGIC,
            _VERSION,
            _LAYOUT_CODES[self._layout],
            0,
            self._bits,
            self._hashes,
            self._count,
        )
        body = header + self._array.tobytes()
        return body + _TRAILER.pack(zlib.crc32(body))

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> BloomSummary:
        """Parse :meth:`to_bytes` output; any malformed input raises ValueError."""
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError(f"from_bytes needs a bytes-like object, got {type(data).__name__}")
        data = bytes(data)
        minimum = _HEADER.size + _TRAILER.size
        if len(data) < minimum:
            raise ValueError(
                f"truncated BloomSummary: got {len(data)} bytes, the header and checksum alone take {minimum}"
            )
        magic, version, code, reserved, bits, hashes, count = _HEADER.unpack_from(data)
        if magic != _MAGIC:
            raise ValueError(f"not a BloomSummary: magic {magic!r}, expected {_MAGIC!r}")
        if version != _VERSION:
            raise ValueError(f"unsupported BloomSummary version {version}; this code reads {_VERSION}")
        if code >= len(LAYOUTS):
            raise ValueError(f"corrupt BloomSummary: layout code {code}, allowed 0..{len(LAYOUTS) - 1}")
        if reserved != 0:
            raise ValueError(f"corrupt BloomSummary: reserved header field is {reserved}, expected 0")
        layout = LAYOUTS[code]
        try:  # validate before allocating: a garbled header may claim 2^40 bits
            _check_geometry(bits, hashes, layout)
        except ValueError as exc:
            raise ValueError(f"corrupt BloomSummary header: {exc}") from None
        nbytes = (_total_bits(bits, hashes, layout) + 7) // 8
        expected = _HEADER.size + nbytes + _TRAILER.size
        if len(data) != expected:
            problem = "truncated" if len(data) < expected else "trailing bytes after"
            raise ValueError(
                f"wrong length ({problem} BloomSummary): header says bits={bits}, hashes={hashes}, "
                f"layout={layout!r}, i.e. {expected} bytes, got {len(data)}"
            )
        (crc,) = _TRAILER.unpack_from(data, expected - _TRAILER.size)
        if zlib.crc32(data[: expected - _TRAILER.size]) != crc:
            raise ValueError("corrupt BloomSummary: CRC-32 checksum mismatch")
        payload = np.frombuffer(data, dtype=np.uint8, count=nbytes, offset=_HEADER.size)
        tail = _total_bits(bits, hashes, layout) % 8
        if tail and int(payload[-1]) >> tail:
            raise ValueError("corrupt BloomSummary: padding bits after the last bit are set")
        summary = cls(bits, hashes, layout)
        summary._array[:] = payload
        summary._count = count
        return summary
