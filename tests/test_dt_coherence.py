"""FedFS's directory-table coherence policies (``protocol: dt_coherence``, issue 25;
``fedsim.protocol.policies.coherence``): each policy's promise stated and checked in the
in-memory runtime, and the behaviour that tells them apart (stale entries found on use,
messages per lookup).  That every runtime gives the same outcomes, messages and trees is
the conformance suite's ("dt_coherence dnfsp1:" and "dt_coherence dnfsp2:")."""

from __future__ import annotations

import errno

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedsim.direct import DirectCluster
from fedsim.memfs import MemFS
from fedsim.protocol.config import ProtocolConfig
from fedsim.protocol.policies.coherence import DT_COHERENCES, Dnfsp1, Dnfsp2, DtCoherence, DtFetch, DtRecall

N = 4
FILES = ("/m/a", "/m/b", "/m/c", "/m/h")


def _cluster(policy: str, n: int = N) -> DirectCluster:
    """``n`` nodes, /m everywhere, FILES spread over the nodes (file i at node i % n)."""
    local = [MemFS() for _ in range(n)]
    for i, fs in enumerate(local):
        fs.populate([(p, 3 + j) for j, p in enumerate(FILES) if j % n == i], ["/m"])
    return DirectCluster(n, local=local, config=ProtocolConfig(dt_coherence=policy))


def _where(c: DirectCluster, path: str) -> int | None:
    """The node whose local tree holds the file ``path`` (None: nowhere)."""
    held = [n for n in range(len(c.nodes)) if _has(c.fs[n], path)]
    assert len(held) <= 1, f"{path} on {held}"
    return held[0] if held else None


def _has(fs: MemFS, path: str) -> bool:
    try:
        return fs.stat(path)[0] is False
    except OSError:
        return False


def _stale(c: DirectCluster) -> int:
    return sum(node.stats.stale_retries for node in c.nodes)


def test_the_registry_the_default_and_the_lazy_hooks_do_nothing():
    assert DT_COHERENCES.names() == ("lazy", "dnfsp1", "dnfsp2")
    assert ProtocolConfig().dt_coherence == "lazy"
    c = _cluster("lazy")
    assert type(c.nodes[0].dt_coherence) is DtCoherence
    for n in range(N):
        for p in FILES:
            c.op(n, "stat", p)
    assert not [k for _, _, k in c.trace if k.startswith("Dt")]  # lazy sends nothing of its own
    assert not {"dt_fetches", "dt_token_grants"} & set(c.nodes[0].counters())  # nor adds counters


def test_an_unknown_policy_is_refused_naming_the_allowed_ones():
    with pytest.raises(ValueError, match="unknown dt coherence policy 'dnfsp3'; allowed: lazy, dnfsp1, dnfsp2"):
        _cluster("dnfsp3")


def _spread_scenario(policy: str) -> DirectCluster:
    """/m/h (manager 3, home 3) is cached at node 1, moved to node 2; then node 0, which never
    cached it, looks it up: its first peer in member order with an entry is node 1."""
    c = _cluster(policy)
    assert c.nodes[0].manager_of("/m/h") == 3 and _where(c, "/m/h") == 3
    c.op(1, "stat", "/m/h")
    assert c.op(3, "migrate", "/m/h", 2) == 1
    assert _where(c, "/m/h") == 2
    return c


def test_dnfsp1_promises_only_per_use_coherence_and_spreads_a_stale_entry():
    """dNFSp1's weaker promise: a miss copies the first entry another member has, without
    asking whether it is current, so a stale entry (node 1's, from before the migration)
    reaches a node that never had one; using it fails at the old home, and the manager is
    asked then (what lazy promises): the answer is right, one stale retry later."""
    c = _spread_scenario("dnfsp1")
    assert c.nodes[1].dt.peek("/m/h").home == 3  # node 1's copy is stale (no further synchronisation)
    before = _stale(c)
    mark = len(c.trace)
    assert c.op(0, "stat", "/m/h") == (False, 6)  # right answer ...
    assert _stale(c) - before == 1 and c.nodes[0].stats.stale_retries == 1  # ... after a stale copy from node 1
    fetched = [dst for src, dst, k in c.messages_since(mark) if k == "DtFetch"]
    assert fetched == [1, 2, 3]  # the miss asked every other member
    assert c.nodes[0].dt.peek("/m/h").home == 2  # then the manager's answer replaced it


def test_dnfsp2_holders_never_serve_a_stale_entry_after_a_migration():
    c = _spread_scenario("dnfsp2")
    assert c.nodes[1].dt.peek("/m/h") is None and "/m/h" not in c.nodes[1].dt_coherence.tokens  # recalled
    assert c.op(0, "stat", "/m/h") == (False, 6)
    assert c.op(1, "stat", "/m/h") == (False, 6)
    assert _stale(c) == 0


def _kinds(c: DirectCluster, node: int, op: str, *args: object) -> list[tuple[int, int, str]]:
    """The lookups, token messages and stats ``op`` caused (not the dirmerge behind a first lookup)."""
    mark = len(c.trace)
    c.op(node, op, *args)
    return [m for m in c.messages_since(mark) if m[2] in ("HomeInfo", "DtToken", "DtRecall", "Stat")]


def test_dnfsp2_a_holder_answers_without_a_message_and_a_transfer_goes_through_the_manager():
    c = _cluster("dnfsp2")
    assert c.nodes[0].manager_of("/m/h") == 3 and _where(c, "/m/h") == 3
    assert _kinds(c, 1, "stat", "/m/h") == [(1, 3, "DtToken"), (1, 3, "Stat")]  # the token from the hash server
    assert _kinds(c, 1, "stat", "/m/h") == [(1, 3, "Stat")]  # the holder: no lookup at all
    # another requester: the manager takes the token back from node 1 before it answers
    assert _kinds(c, 2, "stat", "/m/h") == [(2, 3, "DtToken"), (3, 1, "DtRecall"), (2, 3, "Stat")]
    assert "/m/h" not in c.nodes[1].dt_coherence.tokens and "/m/h" in c.nodes[2].dt_coherence.tokens
    assert c.nodes[3].dt_coherence.holders == {"/m/h": (2, 3)}


def test_dnfsp2_property_every_held_token_names_the_files_home():
    """The promise, checked after every step of random histories of lookups, opens,
    migrations, renames, unlinks and creates from every node: the entry of every token a
    node holds names the node whose local tree holds the file; and no use ever met a stale
    entry (the in-memory runtime runs one operation at a time: nothing races a change)."""

    @settings(max_examples=40, deadline=None)
    @given(st.lists(st.tuples(st.integers(0, N - 1), st.sampled_from(("stat", "open", "migrate", "rename",
                                                                      "unlink", "create")),
                              st.sampled_from(FILES), st.sampled_from(FILES), st.integers(0, N - 1)),
                    min_size=5, max_size=30))  # fmt: skip
    def run(history: list[tuple[int, str, str, str, int]]) -> None:
        c = _cluster("dnfsp2")
        for node, op, a, b, to in history:
            args: tuple[object, ...] = {"stat": (a,), "open": (a,), "migrate": (a, to), "rename": (a, b),
                                        "unlink": (a,), "create": (a,)}[op]  # fmt: skip
            try:
                fd = c.op(node, op, *args)
                if op == "open":
                    c.op(node, "close", fd)
            except OSError as exc:
                assert exc.errno in (errno.ENOENT, errno.EEXIST), (op, args, exc)
            for n, member in enumerate(c.nodes):
                for path in member.dt_coherence.tokens:
                    e = member.dt.peek(path)
                    assert e is not None and e.home == _where(c, path), (n, path, e, _where(c, path))
        assert _stale(c) == 0

    run()


_HISTORY = st.lists(st.tuples(st.integers(0, N - 1), st.sampled_from(("stat", "migrate", "rename", "unlink", "create")),
                              st.sampled_from(FILES), st.sampled_from(FILES), st.integers(0, N - 1)),
                    min_size=5, max_size=30)  # fmt: skip


def _play(policy: str, history: list[tuple[int, str, str, str, int]]) -> tuple[list[object], DirectCluster]:
    c = _cluster(policy)
    out: list[object] = []
    for node, op, a, b, to in history:
        args = {"stat": (a,), "migrate": (a, to), "rename": (a, b), "unlink": (a,), "create": (a,)}[op]
        try:
            out.append(c.op(node, op, *args))
        except OSError as exc:
            out.append(("error", exc.errno))
    return out, c


def test_property_what_every_policy_promises_to_a_client_is_the_same():
    """Whatever a policy does with entries, a client sees the same answers (the coherence
    promises differ in stale entries met and messages, not in results): every op of random
    histories answers the same under lazy, dnfsp1 and dnfsp2, and dnfsp1's stale entries are
    each found on use (no more stale entries used than its stale retries)."""

    @settings(max_examples=30, deadline=None)
    @given(_HISTORY)
    def run(history: list[tuple[int, str, str, str, int]]) -> None:
        ref, _ = _play("lazy", history)
        for policy in ("dnfsp1", "dnfsp2"):
            got, c = _play(policy, history)
            assert got == ref, policy
            used = sum(n.dt_coherence.stale_entries for n in c.nodes)
            assert used <= _stale(c)

    run()


@pytest.mark.parametrize("policy", ["lazy", "dnfsp1", "dnfsp2"])
def test_every_policy_gives_the_same_answers(policy):
    c = _spread_scenario(policy)
    c.op(2, "rename", "/m/a", "/m/e")
    c.op(1, "unlink", "/m/b")
    assert [c.op(n, "readdir", "/m") for n in range(N)] == [[("c", False), ("e", False), ("h", False)]] * N
    for n in range(N):
        assert c.op(n, "stat", "/m/h") == (False, 6) and c.op(n, "stat", "/m/e") == (False, 3)


def _read_mostly(policy: str) -> tuple[int, int, DirectCluster]:
    """Every node looks every file up, the files move, every node looks them up again:
    (messages, stale retries)."""
    c = _cluster(policy)
    mark = len(c.trace)
    for n in range(N):
        for p in FILES:
            c.op(n, "stat", p)
    for j, p in enumerate(FILES):
        c.op(j % N, "migrate", p, (j + 1) % N)
    for _ in range(2):
        for n in range(N):
            for p in FILES:
                c.op(n, "stat", p)
    return len(c.messages_since(mark)), _stale(c), c


def test_stale_entries_and_messages_differ_between_policies_in_the_expected_direction():
    lazy, dnfsp1, dnfsp2 = (_read_mostly(p) for p in ("lazy", "dnfsp1", "dnfsp2"))
    # lazy and dnfsp1 keep entries until they fail: every node that cached a moved file
    # meets its stale entry once; dnfsp2 took every token back before the moves ended
    assert lazy[1] > 0 and dnfsp1[1] >= lazy[1] and dnfsp2[1] == 0
    # dnfsp1's misses ask every other member (n - 1 requests) where lazy asks one manager
    assert dnfsp1[0] > lazy[0]
    assert sum(n.counters()["dt_fetches"] for n in dnfsp1[2].nodes) > 0
    # dnfsp2 pays for its promise in recalls (and exclusive tokens moving between readers)
    assert sum(n.counters()["dt_recalls"] for n in dnfsp2[2].nodes) > 0
    assert dnfsp2[0] > lazy[0]


def test_coherence_requests_from_the_wire_are_checked():
    c = _cluster("dnfsp2")
    node = c.nodes[1]
    with pytest.raises(OSError) as e:  # another policy's request
        c.run(1, node.handle(0, DtFetch("/m/a")))
    assert e.value.errno == errno.EINVAL
    with pytest.raises(OSError) as e:  # from a non-member
        node.dt_coherence.on_recall(9, DtRecall("/m/a"))
    assert e.value.errno == errno.EINVAL
    with pytest.raises(OSError) as e:  # a name not in canonical form
        node.dt_coherence.on_recall(0, DtRecall("/m/../etc"))
    assert e.value.errno == errno.EINVAL
    c1 = _cluster("dnfsp1")
    with pytest.raises(OSError):
        c1.nodes[1].dt_coherence.on_fetch(7, DtFetch("/m/a"))
    assert isinstance(c1.nodes[1].dt_coherence, Dnfsp1) and isinstance(node.dt_coherence, Dnfsp2)
