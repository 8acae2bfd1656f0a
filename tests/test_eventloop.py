"""fednode.eventloop: uvloop where installed, asyncio's loop as the fallback, and a log line saying which.

No timing here: ``fednode bench --loop asyncio,uvloop`` prints what each loop costs."""

from __future__ import annotations

import asyncio
import logging
import signal
import subprocess
import sys
import time

import pytest

from fednode import eventloop
from fednode.client import Client
from fednode.cluster import AgentGroup, LoopThread, local_spec, write_local
from fednode.config import Cluster
from fednode.tools.bench import loop_label

try:
    import uvloop  # noqa: F401

    HAS_UVLOOP = True
except ImportError:
    HAS_UVLOOP = False


def _without_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop now raises ImportError


def test_auto_falls_back_to_asyncio_where_uvloop_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    _without_uvloop(monkeypatch)
    monkeypatch.delenv(eventloop.ENV, raising=False)
    factory, which = eventloop.choose()
    assert factory is asyncio.new_event_loop
    assert which.startswith("asyncio") and "uvloop is not installed" in which
    with pytest.raises(ValueError, match="cannot be imported"):
        eventloop.choose("uvloop")
    assert loop_label(None) == "asyncio"
    lt = LoopThread()
    try:
        assert eventloop.name_of(lt.loop) == "asyncio"
        assert lt.run(asyncio.sleep(0, "ran")) == "ran"
    finally:
        lt.close()


def test_the_choice_comes_from_the_argument_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(eventloop.ENV, "asyncio")
    assert eventloop.choose()[0] is asyncio.new_event_loop
    assert "FEDNODE_LOOP" in eventloop.choose()[1]
    monkeypatch.setenv(eventloop.ENV, "turbo")
    with pytest.raises(ValueError, match="must be one of auto, uvloop, asyncio"):
        eventloop.choose()
    assert eventloop.choose("asyncio")[0] is asyncio.new_event_loop  # the argument wins
    assert eventloop.run(asyncio.sleep(0, 7), asyncio.new_event_loop) == 7


@pytest.mark.skipif(not HAS_UVLOOP, reason="uvloop is not installed (the fast extra)")
def test_auto_picks_uvloop_and_in_process_agents_serve_on_it(tmp_path, monkeypatch, caplog) -> None:
    monkeypatch.delenv(eventloop.ENV, raising=False)
    _, which = eventloop.choose()
    assert which.startswith("uvloop")
    assert loop_label("auto") == "uvloop" and loop_label("asyncio") == "asyncio"
    with caplog.at_level(logging.INFO, logger="fednode"):
        with AgentGroup(Cluster(local_spec(tmp_path, 2))) as g:
            assert eventloop.name_of(g.lt.loop) == "uvloop"
            g.op(0, "mkdir", "/d")
            g.op(1, "create", "/d/f")
            assert list(g.op(0, "readdir", "/d")) == [("f", False)]
    assert "event loop: uvloop" in caplog.text


@pytest.mark.parametrize("loop", ["asyncio", "auto"])
def test_fednode_serve_logs_which_loop_runs(tmp_path, loop: str) -> None:
    path = write_local(tmp_path, 1)
    cmd = [sys.executable, "-m", "fednode.cli", "serve", "--cluster", str(path), "--node", "0", "--loop", loop]
    p = subprocess.Popen(cmd, stderr=subprocess.PIPE)
    try:
        for _ in range(300):
            try:
                with Client(path, node=0, timeout=5) as c:
                    assert c.status()["node"] == 0
                break
            except ConnectionError:
                if p.poll() is not None:
                    break
                time.sleep(0.1)
    finally:
        p.send_signal(signal.SIGTERM)
    assert p.wait(20) == 0
    err = p.stderr.read().decode()
    want = "uvloop" if loop == "auto" and HAS_UVLOOP else "asyncio"
    assert f"node 0: event loop: {want}" in err, err


def test_serve_refuses_a_loop_it_cannot_have(tmp_path, monkeypatch) -> None:
    path = write_local(tmp_path, 1)
    env_python = [
        sys.executable,
        "-c",
        "import sys; sys.modules['uvloop'] = None; from fednode.cli import main; sys.exit(main(sys.argv[1:]))",
    ]
    p = subprocess.run(
        [*env_python, "serve", "--cluster", str(path), "--node", "0", "--loop", "uvloop"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2
    assert "uvloop" in p.stderr and "cannot be imported" in p.stderr
