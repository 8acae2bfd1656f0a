"""The machine model (fedsim.machine): cores and processes, mixes, its config, and the runtime on it."""

from __future__ import annotations

from typing import Any

import pytest

from experiments.common import run_postmark
from fedsim.config import Config, ConfigError, validate
from fedsim.machine import Machine, MachineParams
from fedsim.network import preset
from fedsim.runtime import SimCluster

#: a small calibrated machine: every cost non-zero (the order of a 2-core VM's profile)
COSTS: dict[str, Any] = {
    "model": "calibrated",
    "o_us": 12.0,
    "L_us": 2.0,
    "byte_us": 0.0002,
    "call_us": 10.0,
    "dispatch_us": {"*": 12.0},
    "api_us": {"*": 15.0},
    "client_us": {"*": 30.0},
    "mix_agent": 0.14,
    "mix_client": 0.2,
}


def postmark_config(nodes: int = 4, **machine: Any) -> Config:
    """A short PostMark (4 clients, a few hundred transactions) on ``nodes`` nodes."""
    return validate(
        {
            "study": "simulate",
            "seed": 3,
            "cluster": {"nodes": nodes},
            "protocol": {"placement": "with_manager", "hashing": "mod_n"},
            "network": {"preset": "fedfs_prototype"},
            "machine": machine,
            "workload": {
                "kind": "postmark",
                "clients": 4,
                "postmark": {
                    "number": 40,
                    "transactions": 120,
                    "size_low": 2048,
                    "size_high": 8192,
                    "subdirectories": 4,
                    "route": "hash",
                },
            },
        }
    )


# ------------------------------------------------------------------ Machine.run
def test_one_core_serialises_two_processes_two_cores_overlap_them() -> None:
    one = Machine(MachineParams(hosts=1, cores=1), n_nodes=2)
    assert one.run(0, 0.0, 10.0) == 10.0
    assert one.run(1, 0.0, 5.0) == 15.0  # waits for the only core: ends at the sum

    two = Machine(MachineParams(hosts=1, cores=2), n_nodes=2)
    assert two.run(0, 0.0, 10.0) == 10.0
    assert two.run(1, 0.0, 5.0) == 5.0  # the second core: they overlap
    assert two.run(1, 1.0, 5.0) == 10.0  # its process is busy until 5, a core is free then
    assert two.busy == {0: 10.0, 1: 10.0}

    # a host per node (hosts: 0): one core each, no sharing
    apart = Machine(MachineParams(hosts=0, cores=1), n_nodes=2)
    assert apart.run(0, 0.0, 10.0) == 10.0 and apart.run(1, 0.0, 5.0) == 5.0


def test_a_process_runs_one_job_at_a_time_even_with_cores_free() -> None:
    m = Machine(MachineParams(hosts=1, cores=2), n_nodes=1)
    assert m.run(0, 0.0, 10.0) == 10.0
    assert m.run(0, 0.0, 5.0) == 15.0  # one thread: after its first job, though a core is idle
    assert m.run(0, 20.0, 1.0) == 21.0  # submitted when free: starts at once
    client = m.client_proc(7, node=0)
    # 0's jobs all ran on its core (its last, free each time one could start): the other was never booked
    assert m.run(client, 0.0, 3.0) == 3.0
    assert m.run(client, 0.0, 3.0) == 6.0  # on its own core again, though 0's frees at 21
    other = m.client_proc(8, node=0)
    # a third process, booked last: the core that frees first (at 6), not a gap before it ("busy until")
    assert m.run(other, 0.0, 2.0) == 8.0


def test_shared_clients_are_one_process_own_clients_one_each() -> None:
    shared = Machine(MachineParams(hosts=1, cores=4, clients="shared"), n_nodes=2)
    a, b = shared.client_proc(0, node=0), shared.client_proc(1, node=1)
    assert a == b
    assert shared.run(a, 0.0, 4.0) == 4.0 and shared.run(b, 0.0, 4.0) == 8.0

    own = Machine(MachineParams(hosts=2, cores=1, clients="own"), n_nodes=2)
    a, b = own.client_proc(0, node=0), own.client_proc(1, node=1)
    assert a != b
    assert own.run(a, 0.0, 4.0) == 4.0 and own.run(b, 0.0, 4.0) == 4.0  # on their nodes' hosts 0 and 1
    assert own.run(0, 0.0, 1.0) == 5.0  # node 0 shares host 0's core with client 0


def test_mixed_charges_the_extra_share_only_when_the_kind_changes() -> None:
    m = Machine(MachineParams(), n_nodes=1)
    assert m.mixed(0, "stat", 10.0, 0.5) == 15.0  # nothing before: not a batch of stat
    assert m.mixed(0, "stat", 10.0, 0.5) == 10.0
    assert m.mixed(0, "stat", 10.0, 0.5) == 10.0
    assert m.mixed(0, "read", 10.0, 0.5) == 15.0
    assert m.mixed(0, "stat", 10.0, 0.5) == 15.0
    assert m.mixed(1, "stat", 10.0, 0.5) == 15.0  # per process: node 1 did nothing yet
    assert m.mixed(0, "stat", 10.0, 0.0) == 10.0


def test_unlisted_kinds_cost_the_star_entry_or_nothing() -> None:
    m = Machine(MachineParams(dispatch_us={"*": 12.0, "lookup": 9.0}, api_us={"stat": 5.0}), n_nodes=1)
    assert m.dispatch("lookup") == 9.0 and m.dispatch("getattr") == 12.0
    assert m.api("stat") == 5.0 and m.api("read") == 0.0
    assert m.client("read") == 0.0


# ------------------------------------------------------------------ the runtime on a machine
def test_one_client_call_costs_its_cpu_and_two_flights_end_to_end() -> None:
    """One call on a one-node federation, nothing else running: the call's
    latency is the CPU its client and its node booked plus the request's and
    the reply's flights (every step is serial: nothing overlaps)."""
    mp = MachineParams(hosts=1, cores=2, o_us=12.0, L_us=2.0, byte_us=0.001, call_us=10.0,
                       dispatch_us={"*": 12.0}, api_us={"*": 15.0}, client_us={"*": 30.0}, mix_agent=0.14)  # fmt: skip
    c = SimCluster(1, network=preset("fedfs_prototype"), machine=mp)
    c.populate(0, [("/d/f", 4096)], ["/d"])
    c.preload_summaries()
    t0 = c.env.now
    c.env.run(until=c.env.process(c.client_op(0, 0, "stat", "/d/f")))
    m = c.machine
    assert m is not None
    client = m.client_proc(0, 0)
    assert m.busy[client] == pytest.approx(30.0 * 1.0)  # first call of its kind: mix_client is 0
    assert m.busy[0] >= 2 * 12.0 + 15.0 * 1.14  # two message ends and the call
    flights = c.env.now - t0 - m.busy[client] - m.busy[0]
    assert flights == pytest.approx(2 * 2.0)  # G_us_per_byte is 0: L each way
    assert c.messages == 0  # a client's messages are no federation messages


def test_a_call_between_nodes_costs_cpu_at_both_ends_of_each_message() -> None:
    """A stat at node 0 of a file node 1 holds, alone: its latency is the CPU
    the client and both nodes booked plus one flight per message (the client's
    two and the federation's), as no step overlaps another."""
    mp = MachineParams(hosts=1, cores=2, o_us=12.0, L_us=2.0, call_us=10.0, dispatch_us={"*": 12.0},
                       api_us={"*": 15.0}, client_us={"*": 30.0}, mix_agent=0.14)  # fmt: skip
    c = SimCluster(2, network=preset("fedfs_prototype"), machine=mp)
    c.populate(1, [("/d/f", 4096)], ["/d"])
    c.preload_summaries()
    t0, m0 = c.env.now, c.messages
    c.env.run(until=c.env.process(c.client_op(0, 0, "stat", "/d/f")))
    m = c.machine
    assert m is not None
    messages = c.messages - m0
    assert messages >= 2  # at least a request to node 1 and its reply
    cpu = sum(m.busy.values())
    assert c.env.now - t0 == pytest.approx(cpu + (2 + messages) * 2.0)
    # node 0 booked its call's CPU (o and call_us) for each request it sent
    assert m.busy[0] >= 15.0 * 1.14 + (messages // 2) * (2 * 12.0 + 10.0)


def test_a_handler_that_waits_for_the_network_costs_wait_us_once() -> None:
    """An unlink at node 0 of a file node 1 manages and holds, in a directory
    node 2 manages: node 1's handler waits for node 2 (DelEntry), once; with
    ``wait_us`` the unlink takes exactly that much longer, alone on its host
    (a host per node: nothing else competes for the cores)."""
    from fedsim.protocol.hashing import names_managed_by
    from fedsim.protocol.policies.homes import Pinned

    def unlink_us(wait_us: float) -> tuple[float, float]:
        mp = MachineParams(hosts=0, cores=2, o_us=12.0, L_us=2.0, call_us=10.0, dispatch_us={"*": 12.0},
                           api_us={"*": 15.0}, client_us={"*": 30.0}, wait_us=wait_us)  # fmt: skip
        c = SimCluster(3, network=preset("fedfs_prototype"), machine=mp)
        c.preload_summaries()
        hashing = c.nodes[0].view.hashing
        d = names_managed_by(hashing, 2, "/d")[0]
        f = names_managed_by(hashing, 1, f"{d}/f")[0]
        for node, path, home in ((2, d, 2), (1, f, 1)):
            c.nodes[node].placement = Pinned({path: home}, c.nodes[node].placement)
        for op, path in (("mkdir", d), ("create", f)):
            c.env.run(until=c.env.process(c.client_op(0, 0, op, path)))
        t0 = c.env.now
        assert c.machine is not None
        before = c.machine.busy.get(1, 0.0)
        c.env.run(until=c.env.process(c.client_op(0, 0, "unlink", f)))
        return c.env.now - t0, c.machine.busy[1] - before

    (t_none, cpu_none), (t_wait, cpu_wait) = unlink_us(0.0), unlink_us(40.0)
    assert cpu_wait - cpu_none == pytest.approx(40.0)  # node 1's handler waited once
    assert t_wait - t_none == pytest.approx(40.0)


def test_fewer_cores_predict_lower_postmark_throughput() -> None:
    one = run_postmark(postmark_config(4, **COSTS, hosts=1, cores=1)).metrics
    four = run_postmark(postmark_config(4, **COSTS, hosts=1, cores=4)).metrics
    assert one["ops_done"] == four["ops_done"] > 0 and one["errors"] == four["errors"] == 0
    assert one["postmark_tps"] < four["postmark_tps"]
    assert one["throughput_ops_s"] < four["throughput_ops_s"]
    assert one["latency_mean_us"] > four["latency_mean_us"]


def test_the_machine_costs_simulated_time_and_the_papers_model_is_unchanged_by_it() -> None:
    off = run_postmark(postmark_config(4)).metrics
    on = run_postmark(postmark_config(4, **COSTS, hosts=1, cores=2)).metrics
    assert off["ops_done"] == on["ops_done"]  # the same PostMark, on another machine
    assert on["latency_mean_us"] > off["latency_mean_us"]
    assert (
        run_postmark(postmark_config(4, model="none", **{k: v for k, v in COSTS.items() if k != "model"})).metrics
        == off
    )


def test_the_same_config_twice_gives_the_same_metrics_on_a_machine() -> None:
    cfg = postmark_config(4, **COSTS, hosts=2, cores=1, clients="own")
    a, b = run_postmark(cfg), run_postmark(cfg)
    assert a.metrics == b.metrics
    assert a.cluster.env.now == b.cluster.env.now
    ma, mb = a.cluster.machine, b.cluster.machine
    assert ma is not None and mb is not None and ma.busy == mb.busy


# ------------------------------------------------------------------ config
def test_a_calibrated_machine_without_its_measurements_names_fednode_calibrate() -> None:
    with pytest.raises(ConfigError, match="fednode calibrate") as err:
        validate({"study": "simulate", "machine": {"model": "calibrated"}}, "x.yaml")
    assert "o_us" in str(err.value)
    with pytest.raises(ConfigError, match="o_us"):
        validate({"study": "simulate", "machine": {"model": "calibrated", "L_us": 2.0}}, "x.yaml")
    cfg = validate({"study": "simulate", "machine": {"model": "calibrated", "o_us": 12.0, "L_us": 2.0}})
    assert cfg.machine.o_us == 12.0


def _contention_params(**kw: Any) -> MachineParams:
    return MachineParams(hosts=1, cores=2, o_us=8.0, L_us=25.0, call_us=3.0, api_us={"*": 20.0},
                         client_us={"*": 15.0}, **kw)  # fmt: skip


def test_fit_contention_recovers_the_share_and_the_cores_worth_the_bench_was_simulated_with() -> None:
    """The calibration's two fits, on a microbenchmark whose truth is known: the CPU per call
    (measured as processes' CPU: no lost core time in it) sets the share, the calls per second
    the cores' worth; and whole cores fitted where the rates say so."""
    from dataclasses import replace

    from fedsim.machine import contention_bench, fit_contention

    truth = _contention_params(oversub_share=0.2, capacity=1.5)
    cpu = {k: contention_bench(replace(truth, capacity=0.0), k)[0] for k in (1, 2, 3, 4)}
    rates = {k: contention_bench(truth, k)[1] for k in (1, 2, 3, 4)}
    share, cap = fit_contention(_contention_params(), cpu, rates)
    assert share == pytest.approx(0.2, abs=0.03)
    assert cap == pytest.approx(1.5, abs=0.05)
    whole = {k: contention_bench(replace(truth, capacity=0.0), k)[1] for k in (1, 2, 3, 4)}
    assert fit_contention(_contention_params(), cpu, whole)[1] in (0.0, pytest.approx(2.0, abs=0.05))
    assert fit_contention(_contention_params(), cpu)[1] == 0.0  # no rates: whole cores


# ------------------------------------------------------------------ cold caches
def test_oversubscription_counted_on_the_booked_processes_is_the_count_over_all_of_them() -> None:
    """``book`` counts a host's runnable processes on the list of those booked since they were last
    seen idle, stopping once they outnumber the cores; counting over every process of the host (what
    it does for a time before the latest) must give the same prices, to the bit."""
    import random

    p = MachineParams(hosts=1, cores=2, oversub_share=0.3, capacity=1.5)
    fast, full = Machine(p, 12), Machine(p, 12)
    full.pruned = float("inf")  # every job before the latest time: the count over all processes
    for m in (fast, full):
        m.add_proc("program", 0)
        m.add_proc("thread", 0, "program")  # a thread: not a process of its own to the count
    rng = random.Random(7)
    now = 0.0
    for _ in range(3000):
        now += rng.choice((0.0, 0.0, 1.0, 5.0, 40.0))
        proc = rng.choice([*range(12), "program", "thread"])
        us = rng.uniform(1.0, 30.0)
        assert fast.run(proc, now, us) == full.run(proc, now, us)
    assert fast.busy == full.busy


def test_a_wake_after_more_processes_than_cores_pays_a_refill_each_up_to_the_cap() -> None:
    m = Machine(MachineParams(hosts=1, cores=2, cold_us=4.0, cold_cap_us=10.0), n_nodes=6)
    assert m.run(0, 0.0, 10.0) == 10.0  # first job: nobody ran before it
    assert m.run(1, 100.0, 10.0) == 110.0  # one other before it: warm
    assert m.run(0, 200.0, 10.0) == 210.0  # one other since its last: within the cores, warm
    m.run(1, 300.0, 1.0)
    m.run(2, 400.0, 1.0)
    assert m.run(0, 500.0, 10.0) == 510.0  # two others since (1 and 2): as many as cores, still warm
    m.run(1, 600.0, 1.0)
    m.run(2, 700.0, 1.0)
    m.run(3, 800.0, 1.0)  # its first job: 0, 1 and 2 ran before it, one beyond the cores
    assert m.run(0, 900.0, 10.0) == 900.0 + 10.0 + 4.0  # three others since: one beyond the cores
    for p in (1, 2, 3, 4, 5):
        m.run(p, 1000.0 + 100.0 * p, 1.0)
    assert m.run(0, 2000.0, 10.0) == 2000.0 + 10.0 + 10.0  # five others: 3 x 4 us, capped at 10
    assert m.run(0, 3000.0, 10.0) == 3010.0  # nobody ran since: warm again
    assert m.busy[3] == 1.0 + 4.0 + 1.0 + 4.0  # its first job and its wake after 4, 5, 0, 1, 2 ran (one)


def test_threads_of_one_client_program_share_its_caches() -> None:
    """A client program's threads (``clients: shared``) run in its memory: they are not other
    processes to each other or to it, and a thread's job warms the program's caches."""
    m = Machine(MachineParams(hosts=1, cores=2, cold_us=5.0), n_nodes=2)
    prog = m.client_proc(0, node=0)
    threads = [m.add_proc(("client-thread", i), 0, prog) for i in range(4)]
    m.run(prog, 0.0, 1.0)
    for i, t in enumerate(threads):
        assert m.run(t, 1.0 + i, 1.0) == 2.0 + i  # threads and their program: one memory, never cold
    m.run(0, 10.0, 1.0)
    m.run(1, 11.0, 1.0)
    assert m.run(prog, 12.0, 1.0) == 13.0  # two agents since the program's threads last ran: the cores'
    assert m.run(0, 13.0, 1.0) == 14.0  # agent 0: node 1 and the program since (two, the cores' worth)


def test_fit_cold_recovers_the_refill_and_its_cap_the_chain_was_simulated_with() -> None:
    """The chain microbenchmark's fit, on a benchmark whose truth is known (the simulator's own
    chain with refills priced), and none where the CPU per call does not grow."""
    from dataclasses import replace

    from fedsim.machine import chain_bench, fit_cold

    base = _contention_params()
    truth = replace(base, cold_us=12.0, cold_cap_us=30.0)
    flat = {k: chain_bench(base, k)[0] for k in range(1, 7)}
    priced = {k: flat[k] + sum(j * min(12.0 * o, 30.0) for o, j in chain_bench(truth, k)[1].items())
              for k in range(1, 7)}  # fmt: skip
    assert priced[6] > priced[4] > priced[3] > priced[2] == pytest.approx(priced[1])  # it grows, then is capped
    assert priced[6] == pytest.approx(priced[5])
    assert fit_cold(base, priced) == (pytest.approx(12.0, abs=0.25), pytest.approx(30.0, abs=0.5))
    assert fit_cold(base, flat) == (0.0, 0.0)


def test_a_serial_chain_through_more_processes_than_cores_costs_more_cpu_per_call() -> None:
    """The runtime on a machine with refills: one client calling six agents in turn spends more
    CPU per call than calling one, by the refills of the agents it wakes; without them, the same."""
    from dataclasses import replace

    from fedsim.machine import chain_bench

    base = _contention_params()
    cold = replace(base, cold_us=12.0, cold_cap_us=30.0)

    def cpu(params: MachineParams, k: int) -> float:
        from fedsim.machine import _Refills

        assert not isinstance(params, _Refills)
        c = SimCluster(k, network=preset("fedfs_prototype"), machine=replace(params, hosts=1))
        c.preload_summaries()
        for a in range(k):
            c.run_op(a, "mkdir", f"/c{a}")
        assert c.machine is not None
        c.machine.clear_busy()
        for j in range(60):
            c.env.run(until=c.env.process(c.client_op(0, j % k, "stat", f"/c{j % k}")))
        return sum(c.machine.busy.values()) / 60

    assert cpu(cold, 6) > cpu(base, 6) + 20.0  # each call wakes an agent four others evicted: capped at 30
    assert cpu(cold, 2) == pytest.approx(cpu(base, 2))  # three processes on two cores: always warm
    assert chain_bench(cold, 6)[0] == pytest.approx(chain_bench(base, 6)[0])  # the bench counts refills apart


# ------------------------------------------------------------------ receipts without a wake
def test_a_receipt_at_a_busy_process_does_not_pay_for_a_wake() -> None:
    m = Machine(MachineParams(hosts=1, cores=2, wake_us=4.0), n_nodes=2)
    assert m.receive(0, 0.0, 10.0) == 10.0  # idle: its event loop slept, the receipt wakes it
    assert m.receive(0, 5.0, 10.0) == 16.0  # still busy when it arrived: read without a wake (10 - 4)
    assert m.receive(0, 20.0, 3.0) == 23.0  # idle again: the whole receipt
    assert m.receive(0, 21.0, 3.0) == 23.0  # a receipt never costs less than nothing
    assert m.run(0, 22.0, 5.0) == 28.0  # other work is priced as before


def test_only_a_woken_job_loses_core_time_or_finds_its_caches_cold() -> None:
    """A process that never slept keeps its core: beside a busy core its jobs run at full speed
    (``capacity``) and on warm caches (``cold_us``); one that slept pays both when it wakes."""
    m = Machine(MachineParams(hosts=1, cores=2, capacity=1.0, cold_us=3.0), n_nodes=5)
    m.run(1, 1.0, 100.0)  # the other core busy until 101
    assert m.run(0, 1.0, 10.0) == 21.0  # 0 wakes beside it: 2 cores in use on 1 core's worth, twice as long
    assert m.run(0, 5.0, 10.0) == 31.0  # queued behind its own work: it never slept, full speed
    for p in (2, 3, 4):
        m.run(p, 200.0 + p, 1.0)
    assert m.run(0, 300.0, 10.0) == 313.0  # woken after 2, 3 and 4 ran: one beyond the cores



def test_fit_wake_recovers_the_discount_the_fan_in_was_simulated_with() -> None:
    from dataclasses import replace

    from fedsim.machine import fan_in_bench, fit_wake

    base = _contention_params()
    truth = replace(base, wake_us=5.0)
    cpu = {k: fan_in_bench(truth, k)[0] for k in (1, 2, 4, 8)}
    assert cpu[8] < cpu[2] < cpu[1]  # the busier the agent, the fewer wakes it pays for
    assert fit_wake(base, cpu) == pytest.approx(5.0, abs=0.1)
    assert fit_wake(base, {k: fan_in_bench(base, k)[0] for k in (1, 2, 4, 8)}) == 0.0


# ------------------------------------------------------------------ run to completion, brief idles
def test_a_request_that_finds_its_agent_busy_waits_for_the_work_in_hand_to_reach_its_reply() -> None:
    """An agent answers a call at once, in the callback that read it: a second call that arrives
    meanwhile is read after the first's reply has left, not between its receipt and its reply
    (which would hold both back and leave two clients' calls in step); read by a loop that never
    slept, it pays no wake."""

    class Logged(Machine):
        __slots__ = ("log",)

        def book(self, st: Any, now: float, us: float, receipt: bool = False, awake: bool = False) -> float:
            start = max(now, st.free)
            done = super().book(st, now, us, receipt, awake)
            if st is self.nodes[0] and self.log is not None:
                self.log.append((start, done))
            return done

    mp = MachineParams(hosts=1, cores=2, o_us=12.0, L_us=2.0, dispatch_us={"*": 12.0}, api_us={"*": 15.0},
                       client_us={"*": 30.0}, wake_us=5.0)  # fmt: skip
    c = SimCluster(2, network=preset("fedfs_prototype"), machine=mp)
    m = c.machine = Logged(mp, 2)
    m.log = None
    c.preload_summaries()
    c.env.run(until=c.env.process(c.client_op(0, 0, "create", "/f")))
    m.log = []
    a = c.env.process(c.client_op(0, 0, "stat", "/f"))
    b = c.env.process(c.client_op(1, 0, "stat", "/f"))
    c.env.run(until=c.env.all_of([a, b]))
    (r1, s1), (l1, e1), (p1, q1), (r2, s2) = m.log[:4]  # receipt, local stat, reply; the second's receipt
    assert r1 < r2 and s1 <= l1 and e1 <= p1  # the first call's work, in order ...
    assert r2 == q1  # ... all of it before the second call is read (it arrived at once, during the first)
    assert s2 - r2 == pytest.approx(s1 - r1 - 5.0)  # read by a loop that never slept: no wake


def test_a_receipt_after_a_brief_idle_on_its_own_core_pays_no_wake() -> None:
    """A process idle for less than ``poll_us``, on a core no other process took meanwhile, is
    woken on a polling vCPU: its receipt costs ``wake_us`` less, as a busy one's does."""
    m = Machine(MachineParams(hosts=1, cores=2, wake_us=4.0, poll_us=10.0), n_nodes=3)
    assert m.receive(0, 0.0, 10.0) == 10.0  # first: it slept
    assert m.receive(0, 15.0, 10.0) == 21.0  # idle 5 us on its own core: 10 - 4
    assert m.receive(0, 40.0, 10.0) == 50.0  # idle 19 us: halted, the whole receipt
    m.run(1, 50.0, 100.0)  # another process takes the other core ...
    m.run(2, 52.0, 3.0)  # ... and a third, 0's core, until 55
    assert m.receive(0, 56.0, 10.0) == 66.0  # idle 6 us, but its core ran another process: the whole receipt
    off = Machine(MachineParams(hosts=1, cores=2, wake_us=4.0), n_nodes=1)
    off.receive(0, 0.0, 10.0)
    assert off.receive(0, 15.0, 10.0) == 25.0  # without poll_us every idle pays


def test_fit_poll_recovers_the_idle_span_and_discount_the_fan_in_was_simulated_with() -> None:
    from dataclasses import replace

    from fedsim.machine import fan_in_bench, fit_poll

    base = _contention_params()
    truth = replace(base, wake_us=5.0, poll_us=20.0)
    runs = {k: fan_in_bench(truth, k) for k in (1, 2, 4, 8)}
    poll, wake = fit_poll(base, {k: r.cpu for k, r in runs.items()}, {k: r.rate for k, r in runs.items()})
    assert wake == pytest.approx(5.0, abs=0.2)
    fitted = replace(base, wake_us=wake, poll_us=poll)  # (a span the bench cannot tell apart may differ)
    for k, r in runs.items():
        assert fan_in_bench(fitted, k).cpu == pytest.approx(r.cpu, rel=0.01)
    flat = {k: fan_in_bench(base, k) for k in (1, 2, 4, 8)}
    assert fit_poll(base, {k: r.cpu for k, r in flat.items()}, {k: r.rate for k, r in flat.items()})[1] == 0.0


def test_a_client_programs_job_for_another_thread_than_its_last_costs_the_gils_hand_off() -> None:
    """``gil_us``: the threads of one client program take turns; a turn's change costs, one thread's
    calls never do, and a price of 0 changes nothing (the model without it, to the bit)."""
    from dataclasses import replace

    from fedsim.machine import contention_bench

    base = replace(_contention_params(client_user_share=0.6), client_us={"*": 40.0})
    m = Machine(replace(base, gil_us=5.0), n_nodes=2)
    a, b, prog = m.thread_state(0, 0), m.thread_state(1, 0), m.client_state(0, 0)
    assert [m.handover(prog, t) for t in (a, a, b, b, a)] == [0.0, 0.0, 5.0, 0.0, 5.0]
    one = contention_bench(replace(base, gil_us=5.0), 1)
    assert one == contention_bench(base, 1)  # one thread: no change of turn
    two, plain = contention_bench(replace(base, gil_us=5.0), 2), contention_bench(base, 2)
    assert two.client == pytest.approx(plain.client + 10.0, abs=0.5)  # both of a call's jobs change turns


def test_fit_gil_recovers_the_hand_off_the_benchmarks_were_simulated_with() -> None:
    from dataclasses import replace

    from fedsim.machine import contention_bench, fan_in_bench, fit_gil

    base = replace(_contention_params(client_user_share=0.6), client_us={"*": 40.0})
    truth = replace(base, gil_us=6.0)
    contention = {k: contention_bench(truth, k).client for k in (1, 2, 3, 4)}
    fan_in = {k: fan_in_bench(truth, k).client for k in (1, 2, 4, 8)}
    assert fit_gil(base, contention, fan_in) == pytest.approx(6.0, abs=0.3)
    flat = {k: contention_bench(base, k).client for k in (1, 2, 3, 4)}
    assert fit_gil(base, flat) == 0.0
