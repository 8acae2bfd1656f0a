"""The FUSE model (fedsim.fuse): which kernel requests a program's system calls become.

Each rule here was counted on a real mount first (the mount's callback counters):
a change in a directory makes the next lookup in it fetch the directory's
attributes again; a write makes the file's attributes stale; a write that starts
inside a page and runs past its end reaches the mount in two parts."""

from __future__ import annotations

from typing import Any

import pytest

from fedsim.fuse import FuseParams, Mount
from fedsim.machine import MachineParams
from fedsim.network import preset
from fedsim.runtime import SimCluster

#: a calibrated mount's section, shaped as ``fednode calibrate --mount`` writes it
FUSE: dict[str, Any] = {
    "mount_cpu_outside_callbacks_us": 50.0,
    "cache": {"entry_timeout_s": 1.0, "attr_timeout_s": 1.0},
    "callbacks": {name: {"cpu_us": 40.0} for name in ("getattr", "create", "open", "write", "unlink", "flush")},
    "syscalls": {
        # measured back to back in one directory: each change paid the directory's getattr
        "creat": {"callbacks": {"create": 1.0, "getattr": 2.0}, "round_trips": 3.0, "app_cpu_us": 10.0},
        "unlink": {"callbacks": {"getattr": 1.0, "unlink": 1.0}, "round_trips": 2.0, "app_cpu_us": 10.0},
        "mkdir": {"callbacks": {"getattr": 1.0, "mkdir": 1.0}, "round_trips": 2.0, "app_cpu_us": 10.0},
        "rmdir": {"callbacks": {"getattr": 1.0, "rmdir": 1.0}, "round_trips": 2.0, "app_cpu_us": 10.0},
        # measured in a directory nobody changed
        "open_cold": {"callbacks": {"getattr": 1.0, "open": 1.0}, "round_trips": 2.0, "app_cpu_us": 10.0},
        "open_cached": {"callbacks": {"open": 1.0}, "round_trips": 1.0, "app_cpu_us": 10.0},
        "open_append": {"callbacks": {"open": 1.0}, "round_trips": 1.0, "app_cpu_us": 10.0},
        "write4k": {"callbacks": {"write": 1.0}, "round_trips": 1.0, "app_cpu_us": 10.0},
        "close_written": {"callbacks": {"flush": 1.0}, "round_trips": 1.0, "app_cpu_us": 10.0},
        "close_read": {"callbacks": {"flush": 1.0}, "round_trips": 1.0, "app_cpu_us": 10.0},
    },
}


#: the same mount measured as root on a mount only root enters: no mode checks in the kernel, so no
#: change cost a directory's getattr (``fednode.mount.kernel_checks``)
ROOTS: dict[str, Any] = {
    **FUSE,
    "default_permissions": False,
    "syscalls": {
        **FUSE["syscalls"],
        "creat": {"callbacks": {"create": 1.0, "getattr": 1.0}, "round_trips": 2.0, "app_cpu_us": 10.0},
        "unlink": {"callbacks": {"unlink": 1.0}, "round_trips": 1.0, "app_cpu_us": 10.0},
    },
}


def mounted(fuse: dict[str, Any] = FUSE) -> tuple[SimCluster, Mount]:
    mp = MachineParams(hosts=1, cores=2, o_us=10.0, L_us=2.0, api_us={"*": 10.0}, client_us={"*": 20.0})
    c = SimCluster(1, network=preset("fedfs_prototype"), machine=mp)
    c.populate(0, [("/d/a", 100), ("/d/b", 100), ("/d/c", 100)], ["/d"])
    c.preload_summaries()
    return c, Mount(c, FuseParams.from_profile(fuse), 0, 0)


def round_trips(c: SimCluster, m: Mount, phase: str, calls: list[tuple[str, tuple[Any, ...]]], path: str) -> int:
    """The mount's calls to its agent that one system call of ``phase`` makes (a
    pipeline's calls each counted)."""
    before = c.client_ops[0]
    c.env.run(until=c.env.process(m.syscall(phase, calls, path, None)))
    return c.client_ops[0] - before


def test_an_open_in_a_changed_directory_fetches_its_attributes_again() -> None:
    c, m = mounted()
    assert round_trips(c, m, "open_cold", [("open", ("/d/a",))], "/d/a") == 3  # /d never fetched: + its getattr
    assert round_trips(c, m, "open_cold", [("open", ("/d/b",))], "/d/b") == 2  # the lookup and the open
    assert round_trips(c, m, "unlink", [("unlink", ("/d/c",))], "/d/c") == 2  # a change: /d's attributes dropped
    assert round_trips(c, m, "open_cold", [("open", ("/d/b",))], "/d/b") == 3
    c.env.run(until=c.env.now + 1.5e6)  # past the attribute timeout
    assert round_trips(c, m, "open_cached", [("open", ("/d/b",))], "/d/b") == 2


def test_a_change_in_a_directory_the_kernel_holds_is_spared_the_getattr_its_phase_paid() -> None:
    c, m = mounted()
    round_trips(c, m, "open_cold", [("open", ("/d/a",))], "/d/a")  # /d's attributes fetched
    # the name's lookup (the directory's getattr spared), then create_open: create, open and getattr in one
    assert round_trips(c, m, "creat", [("create_open", ("/d/n",))], "/d/n") == 1 + 1
    # right after a change: both getattrs, as measured
    assert round_trips(c, m, "creat", [("create_open", ("/d/o",))], "/d/o") == 2 + 1


def test_without_the_kernels_mode_checks_no_change_costs_a_directorys_getattr() -> None:
    c, m = mounted(ROOTS)
    assert not m.params.dir_checks
    assert round_trips(c, m, "open_cold", [("open", ("/d/a",))], "/d/a") == 2  # /d never fetched: no matter
    m.seen["/d/c"] = c.env.now
    assert round_trips(c, m, "unlink", [("unlink", ("/d/c",))], "/d/c") == 1  # as measured
    assert round_trips(c, m, "open_cold", [("open", ("/d/b",))], "/d/b") == 2  # the change dropped nothing needed
    # the new name's lookup, then create_open, after a change as before one
    assert round_trips(c, m, "creat", [("create_open", ("/d/n",))], "/d/n") == 1 + 1
    assert round_trips(c, m, "creat", [("create_open", ("/d/o",))], "/d/o") == 1 + 1


def test_a_removal_of_a_name_the_kernel_has_not_looked_up_pays_its_lookup() -> None:
    c, m = mounted()
    m.seen["/d/a"] = c.env.now  # looked up just now
    assert round_trips(c, m, "unlink", [("unlink", ("/d/a",))], "/d/a") == 2  # as measured
    assert round_trips(c, m, "unlink", [("unlink", ("/d/b",))], "/d/b") == 3  # its lookup first


def test_a_written_file_is_looked_up_again_at_its_next_open() -> None:
    c, m = mounted()
    m.seen["/d/a"] = c.env.now
    m.written("/d/a")
    assert not m._fresh("/d/a")  # the open after a write is a cold one
    assert m._fresh("/d/a")  # and that lookup made it fresh


@pytest.mark.parametrize(
    ("offset", "size", "parts"),
    [(0, 4096, [4096]), (8192, 4096, [4096]), (100, 4096, [3996, 100]), (100, 1360, [1360]), (4000, 200, [96, 104])],
)
def test_a_write_from_inside_a_page_past_its_end_is_two_writes(offset: int, size: int, parts: list[int]) -> None:
    got = Mount.write_parts((7, offset, bytes(size)))
    assert [len(p[2]) for p in got] == parts
    assert [p[1] for p in got] == [offset + sum(parts[:i]) for i in range(len(parts))]
    assert all(p[0] == 7 for p in got)


@pytest.mark.parametrize("route", ["home", "entry"])
def test_each_call_goes_where_the_real_mount_sends_it(route: str) -> None:
    """``route="home"`` (``fednode mount``'s default, the same ``Router``): a
    path's call to its manager until a getattr names the file's home, then to
    the home; a descriptor's calls to the agent that opened it.  ``entry``: all
    to the mount's node, which relays."""
    from fedsim.protocol.routing import Router

    mp = MachineParams(hosts=1, cores=2, o_us=10.0, L_us=2.0, api_us={"*": 10.0}, client_us={"*": 20.0})
    c = SimCluster(4, network=preset("fedfs_prototype"), machine=mp)
    managers = Router("hash", c.spec)
    m_a = managers.entry(0, "/d/a")
    home = (m_a + 1) % 4  # a file its manager does not hold (found in a local tree)
    c.populate(home, [("/d/a", 100)], ["/d"])
    c.preload_summaries()
    mount = Mount(c, FuseParams.from_profile(FUSE), 0, 0, route)
    went: list[tuple[int, str]] = []
    real = c.agent_call

    def spy(node: int, calls: list, trace: Any) -> Any:
        went.append((node, calls[0][0]))
        return (yield from real(node, calls, trace))

    c.agent_call = spy  # type: ignore[method-assign]

    def run(gen: Any) -> Any:
        return c.env.run(until=c.env.process(gen))

    fd = run(mount.syscall("open_cold", [("open", ("/d/a",))], "/d/a", None))
    run(mount.syscall("write4k", [("write", (fd, 0, b"x" * 10))], "", None))
    run(mount.syscall("close_written", [("close", (fd,))], "", None))
    fd = run(mount.syscall("open_cold", [("open", ("/d/a",))], "/d/a", None))
    run(mount.syscall("close_read", [("close", (fd,))], "", None))
    if route == "entry":
        assert {n for n, _ in went} == {0}
        return
    m_d = managers.entry(0, "/d")
    # /d's getattr at its manager, /d/a's at its manager (which names the home), then the open at the home
    assert went[:3] == [(m_a, "getattr"), (m_d, "getattr"), (home, "open")]
    assert went[3:5] == [(home, "write"), (home, "close")]  # the descriptor's calls where it was opened
    assert went[5:] == [(home, "getattr"), (home, "open"), (home, "close")]  # the home learnt: no relay


def cto_mounted() -> tuple[SimCluster, Mount]:
    """``mounted``, with the mount measured in cto: writes held (no round trip), the close
    of a written file carrying them (two round trips: the writes, then the close)."""
    prof = {**FUSE, "consistency": "cto", "write_buffer_bytes": 16384}
    prof["syscalls"] = {
        **FUSE["syscalls"],
        "write4k": {"callbacks": {"write": 1.0}, "round_trips": 0.0, "app_cpu_us": 10.0},
        "close_written": {"callbacks": {"flush": 1.0}, "round_trips": 2.0, "app_cpu_us": 10.0},
    }
    mp = MachineParams(hosts=1, cores=2, o_us=10.0, L_us=2.0, api_us={"*": 10.0}, client_us={"*": 20.0})
    c = SimCluster(1, network=preset("fedfs_prototype"), machine=mp)
    c.populate(0, [("/d/a", 100), ("/d/b", 100), ("/d/c", 100)], ["/d"])
    c.preload_summaries()
    return c, Mount(c, FuseParams.from_profile(prof), 0, 0)


def _run(c: SimCluster, gen: Any) -> Any:
    return c.env.run(until=c.env.process(gen))


def test_cto_holds_writes_until_the_close_which_sends_them_in_one_round_trip() -> None:
    c, m = cto_mounted()
    assert m.params.cto and m.params.write_buffer == 16384
    fd = _run(c, m.syscall("open_cached", [("open", ("/d/a",)), ("getattr", ("/d/a",))], "/d/a", None))
    m.opened(fd, "/d/a")
    before = c.client_ops[0]
    for i in range(3):  # 12 KiB, under the buffer: held
        assert _run(c, m.write_buffered((fd, i * 4096, bytes(4096)), None)) == 4096
    assert c.client_ops[0] == before
    assert len(m.held[fd]) == 1 and len(m.held[fd][0][2]) == 3 * 4096  # sequential: one range
    _run(c, m.close(fd, "close_written", None))
    assert c.client_ops[0] - before == 2  # the held writes, then the close; no getattr invented


def test_cto_sends_held_writes_when_the_buffer_would_overflow() -> None:
    c, m = cto_mounted()
    fd = _run(c, m.syscall("open_cached", [("open", ("/d/b",))], "/d/b", None))
    m.opened(fd, "/d/b")
    before = c.client_ops[0]
    for i in range(5):  # 20 KiB through a 16 KiB buffer: the fifth write sends the four before it
        _run(c, m.write_buffered((fd, i * 4096, bytes(4096)), None))
    assert c.client_ops[0] - before == 1
    _run(c, m.close(fd, "close_written", None))
    assert c.client_ops[0] - before == 3
    # a close with nothing held is the close alone
    fd = _run(c, m.syscall("open_cached", [("open", ("/d/b",))], "/d/b", None))
    before = c.client_ops[0]
    _run(c, m.close(fd, "close_written", None))
    assert c.client_ops[0] - before == 1


def test_cto_keeps_a_files_pages_across_opens_until_someone_writes_it() -> None:
    c, m = cto_mounted()
    other = Mount(c, m.params, 1, 0, versions=m.versions)  # another mount of the same simulation

    def open_read() -> int:
        fd = _run(c, m.syscall("open_cached", [("open", ("/d/c",))], "/d/c", None))
        m.opened(fd, "/d/c")
        before = c.client_ops[0]
        _run(c, m.read(fd, 0, 100, 100, None))
        _run(c, m.close(fd, "close_read", None))
        return c.client_ops[0] - before - 1  # the read's round trips (the close's one aside)

    assert open_read() == 1  # nothing cached: fetched
    assert open_read() == 0  # unchanged: the kernel's pages kept
    other.written("/d/c")  # written at another mount
    assert open_read() == 1
