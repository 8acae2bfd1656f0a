"""The PostMark generator against the real PostMark binary, and against a real
directory.

Tolerance: none.  The generator reproduces PostMark's own random number
generator (MT19937 seeded by its ``sgenrand``) and every draw it makes, so for
the same parameters it makes the same decisions as the binary; any difference
in a count means the algorithm diverged, and "within a few percent" would hide
exactly that.  PostMark prints files as integers (compared exactly) and bytes
as megabytes with two decimals of a single-precision sum (compared as the
printed text, which the generator emulates, and the exact integer totals
within that print's resolution).

The binary comes from Debian's ``postmark`` package (``./dev.sh`` installs it;
CI has it).  Without it only the binary comparison is skipped, naming why.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from experiments.common import postmark_clients, run_postmark
from fedsim.cli import main
from fedsim.config import Config, ConfigError, validate
from fedsim.workloads.postmark import (
    Clients,
    Counts,
    Op,
    PostMark,
    PostMarkParams,
    io_sizes,
    parse_report,
    run,
    run_binary,
)

POSTMARK = shutil.which("postmark")
needs_binary = pytest.mark.skipif(
    POSTMARK is None, reason="the postmark binary is not installed (Debian package 'postmark'; ./dev.sh installs it)"
)

#: parameter sets, each seconds of the binary's time on a local disk
CASES = {
    "defaults-100x1000": PostMarkParams(number=100, transactions=1000),
    "paper-150x30000-subdirs": PostMarkParams(
        number=150, transactions=30000, size_low=2048, size_high=16384, subdirectories=10
    ),
    "big-blocks-unbuffered": PostMarkParams(
        number=200,
        transactions=2000,
        size_low=1000,
        size_high=16384,
        read_block_size=4096,
        write_block_size=4096,
        buffering=False,
        seed=7,
    ),
    "read-heavy-create-heavy": PostMarkParams(number=50, transactions=3000, bias_read=8, bias_create=7, seed=1234),
    "read-only-fig8": PostMarkParams(number=80, transactions=2000, bias_create=-1, bias_read=10, subdirectories=4),
    "append-only": PostMarkParams(number=60, transactions=1500, bias_read=0, bias_create=-1, seed=99),
    # every file already at size_high: each append is refused, and PostMark draws nothing for it
    "fixed-size-appends-refused": PostMarkParams(
        number=60, transactions=1500, size_low=3000, size_high=3000, bias_read=0, bias_create=-1
    ),
}


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory with a short name: PostMark keeps a file's path in 81 bytes."""
    d = Path(tempfile.mkdtemp(prefix="pm", dir="/tmp"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _megabytes(text: str) -> float:
    value, unit = text.split()
    return float(value) / (1 if unit == "megabytes" else 1024)


@needs_binary
@pytest.mark.parametrize("case", sorted(CASES))
def test_counts_equal_the_binarys(case: str, short_dir: Path) -> None:
    params = CASES[case]
    got = parse_report(run_binary(params, short_dir))
    assert list(short_dir.iterdir()) == []  # PostMark deleted everything it made
    _, c = run(params, str(short_dir))
    assert not c.out_of_files
    mine = c.as_dict()
    for key in ("created_alone", "created_mixed", "read", "appended", "deleted_alone", "deleted_mixed"):
        assert mine[key] == got[key], (case, key, mine[key], got[key])
    assert got["created"] == mine["created"]
    assert (got["data_read"], got["data_written"]) == c.report_data()
    # the exact totals lie within the printed value's rounding (0.005 MB) plus the float sum's error
    for exact, printed in ((c.bytes_read, got["data_read"]), (c.bytes_written, got["data_written"])):
        assert abs(exact / 2**20 - _megabytes(str(printed))) <= 0.005 + 1e-6 * exact / 2**20


@needs_binary
def test_out_of_files_as_the_binary(short_dir: Path) -> None:
    """Deletes outrun creates: PostMark stops, says so and prints no report;
    the generator stops at the same transaction with the same files deleted."""
    params = PostMarkParams(number=20, transactions=200, bias_create=1, seed=3)
    out = run_binary(params, short_dir)
    assert "out of files!" in out and "Creation alone" not in out
    ops, c = run(params, str(short_dir))
    assert c.out_of_files and c.transactions_done < params.transactions
    assert c.deleted_alone == 0 and c.created == c.deleted
    assert sum(op.kind == "delete" for op in ops) == c.created


def replay(ops: list[Op], params: PostMarkParams, source: bytes) -> Counts:
    """Perform ``ops`` with plain file operations (stdio-like buffered files or
    raw descriptors, as ``params.buffering`` says) and count what the file
    system did: files it created and removed, bytes it took and gave back."""
    c = Counts()
    wbs, rbs = params.write_block_size, params.read_block_size

    def write(path: str, data: bytes, mode: str) -> int:
        n = 0
        if params.buffering:
            with open(path, mode) as f:
                for i in range(0, len(data), wbs):
                    n += f.write(data[i : i + wbs])
        else:
            flags = os.O_WRONLY | (os.O_CREAT | os.O_EXCL if mode == "xb" else os.O_APPEND)
            fd = os.open(path, flags, 0o644)
            try:
                for i in range(0, len(data), wbs):
                    n += os.write(fd, data[i : i + wbs])
            finally:
                os.close(fd)
        return n

    def read(path: str) -> int:
        n = 0
        with open(path, "rb", buffering=-1 if params.buffering else 0) as f:
            while chunk := f.read(rbs):
                n += len(chunk)
        return n

    for op in ops:
        if op.kind == "mkdir":
            os.mkdir(op.path)
        elif op.kind == "rmdir":
            os.rmdir(op.path)
        elif op.kind == "create":
            c.add_written(write(op.path, source[: op.size], "xb"))
            if op.phase == "pool":
                c.created_alone += 1
            else:
                c.created_mixed += 1
        elif op.kind == "append":
            assert os.path.getsize(op.path) == op.offset
            c.add_written(write(op.path, source[: op.size], "ab"))
            c.appended += 1
        elif op.kind == "read":
            c.add_read(read(op.path))
        elif op.kind == "delete":
            os.unlink(op.path)
            if op.phase == "cleanup":
                c.deleted_alone += 1
            else:
                c.deleted_mixed += 1
    return c


@pytest.mark.parametrize("case", ["defaults-100x1000", "big-blocks-unbuffered", "read-only-fig8"])
def test_replayed_stream_does_what_it_predicts(case: str, tmp_path: Path) -> None:
    """The stream, performed on a real directory, creates, reads, appends and
    deletes exactly what the generator counted, and leaves nothing behind."""
    params = CASES[case]
    pm = PostMark(params, str(tmp_path))
    ops = list(pm.ops())
    on_disk = replay(ops, params, pm.source)
    assert on_disk.as_dict() == pm.counts.as_dict()
    assert on_disk.report_data() == pm.counts.report_data()
    assert list(tmp_path.iterdir()) == []


def test_stream_shape_follows_postmark() -> None:
    """Structure the binary's report cannot show: sizes in [low, high), names
    numbered by creation in s0..s{n-1}, appends never past size_high, every
    transaction one read-or-append and one create-or-delete, and the same seed
    giving the same stream."""
    p = PostMarkParams(number=40, transactions=500, size_low=100, size_high=900, subdirectories=5, seed=9)
    ops, c = run(p, "/c0")
    assert ops == run(p, "/c0")[0]
    assert ops != run(p.model_copy(update={"seed": 10}), "/c0")[0]
    assert [o.path for o in ops[:5]] == [f"/c0/s{k}" for k in range(5)] and {o.kind for o in ops[:5]} == {"mkdir"}
    creates = [o for o in ops if o.kind == "create"]
    assert [int(o.path.rsplit("/", 1)[1]) for o in creates] == list(range(1, len(creates) + 1))
    assert all(100 <= o.size < 900 and re.fullmatch(r"/c0/s[0-4]/\d+", o.path) for o in creates)
    sizes: dict[str, int] = {}
    for o in ops:
        if o.kind == "create":
            sizes[o.path] = o.size
        elif o.kind == "append":
            assert o.offset == sizes[o.path] and 1 <= o.size and o.offset + o.size <= 900
            sizes[o.path] += o.size
        elif o.kind == "read":
            assert o.size == sizes[o.path]
    tx = [o for o in ops if o.phase == "transactions"]
    assert sum(o.kind in ("create", "delete") for o in tx) == p.transactions
    assert c.read + c.appended <= p.transactions  # an append to a full file does nothing
    assert c.created == c.deleted and ops[-1].kind == "rmdir"


def test_clients_have_their_own_file_sets() -> None:
    cl = Clients(PostMarkParams(number=10, transactions=50), clients=3, prefix="/pm")
    streams = [list(cl.client(i).ops()) for i in range(3)]
    for i, s in enumerate(streams):
        assert all(o.path.startswith(f"/pm{i}/") for o in s)
    assert [o.size for o in streams[0]] != [o.size for o in streams[1]]  # seeds differ by client
    with pytest.raises(IndexError):
        cl.client(3)


def test_parameters_checked_as_postmark_checks_them() -> None:
    with pytest.raises(ValueError, match="size_high"):
        PostMarkParams(size_low=10, size_high=5)
    with pytest.raises(ValueError, match="bias_read"):
        PostMarkParams(bias_read=11)
    with pytest.raises(ValueError, match="number"):
        PostMarkParams(number=0)


def test_io_sizes() -> None:
    assert io_sizes(1300, 512, buffering=False) == [512, 512, 276]
    assert io_sizes(1024, 512, buffering=False) == [512, 512]
    assert io_sizes(9000, 512, buffering=True) == [4096, 4096, 808]
    assert io_sizes(0, 512, buffering=True) == []


# ---------------------------------------------------------------------------- the simulator's workload
def _sim_config(route: str, nodes: int = 4, clients: int = 3) -> Config:
    return validate(
        {
            "study": "simulate",
            "seed": 5,
            "cluster": {"nodes": nodes},
            "protocol": {"placement": "with_manager", "hashing": "mod_n"},
            "workload": {
                "kind": "postmark",
                "clients": clients,
                "postmark": {
                    "number": 20,
                    "transactions": 120,
                    "size_low": 1000,
                    "size_high": 9000,
                    "subdirectories": 3,
                    "route": route,
                },
            },
        }
    )


@pytest.mark.parametrize("route", ["hash", "fixed"])
def test_postmark_drives_a_simulated_federation(route: str) -> None:
    """``workload: kind: postmark``: every client's whole stream succeeds on
    the federation, the federation's counts are the generator's, and nothing
    but the clients' directories is left.  Routed by the hash with placement
    at the manager, reads and appends are local (no message, VI-B);
    routed to a fixed server, some are not (Fig. 7)."""
    cfg = _sim_config(route)
    out = run_postmark(cfg)
    m = out.metrics
    assert m["errors"] == 0
    clients = postmark_clients(cfg)
    expected = [run(pm.p, pm.location)[1] for pm in map(clients.client, range(clients.clients))]
    for key, op in (("created", "create"), ("read", "read"), ("appended", "append"), ("deleted", "delete")):
        assert m[f"postmark.{key}"] == sum(c.as_dict()[key] for c in expected) > 0
        assert m[f"count.{op}"] == m[f"postmark.{key}"]
    assert m["postmark_tps"] > 0
    for i in range(3):
        assert out.cluster.run_op(0, "readdir", f"/pm{i}") == []
    if route == "hash":
        assert m["messages_per_op.read"] == 0 and m["messages_per_op.append"] == 0
    else:
        assert m["messages_per_op.read"] > 0
    assert run_postmark(cfg).metrics == m  # deterministic


def test_simulate_config_runs_postmark(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The shipped config, shortened, through ``fedsim run``."""
    cfg = Path(__file__).parent.parent / "configs" / "fedfs" / "postmark.yaml"
    args = [
        "run",
        str(cfg),
        "--out",
        str(tmp_path),
        "--set",
        "workload.postmark.transactions=50",
        "--set",
        "workload.clients=2",
    ]
    assert main(args) == 0
    assert "2 PostMark clients" in capsys.readouterr().out
    assert (tmp_path / "results.csv").read_text().count("postmark_tps") == 1


@pytest.mark.parametrize(
    ("postmark", "words"),
    [
        ({"bias_read": 11}, "workload.postmark.bias_read: Input should be less than or equal to 10"),
        ({"size_low": 900, "size_high": 100}, "workload.postmark: size_high (100) is below size_low (900)"),
        ({"nmber": 3}, "workload.postmark.nmber: unknown key; allowed keys: number, "),
        ({"route": "nearest"}, "workload.postmark.route"),
    ],
)
def test_a_bad_postmark_section_is_worded(postmark: dict[str, object], words: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate({"study": "simulate", "workload": {"kind": "postmark", "postmark": postmark}}, "x.yaml")
    assert words in str(info.value)


def test_file_contents_are_postmarks() -> None:
    """PostMark fills every file from a buffer of its first ``2 * size_high``
    draws (``32 + RND(95)``).  Known answer, read off the binary with strace
    (seed 42: every file it writes starts with these bytes), so the generator's
    replay writes the binary's bytes, not only its sizes."""
    pm = PostMark(PostMarkParams(number=3, transactions=10, size_low=9000, size_high=9001), "/x")
    list(pm.ops())
    assert pm.source[:32] == b"LeZebJ6S5~qPv$C$py}hmKd H58nM4~."
    assert len(pm.source) == 2 * 9001 and all(32 <= b < 127 for b in pm.source)
