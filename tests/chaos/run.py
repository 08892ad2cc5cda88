"""Fault-injection runs (Jepsen-style): every output, table value and dead letter counted.

    python -m tests.chaos --broker 127.0.0.1:29092 --driver confluent --guarantee exactly_once \
        --scenario kill --records 60000 --kills 20
    python -m tests.chaos --broker 127.0.0.1:29092 --scenario outage --fault-seconds 45 \
        --broker-stop "real-kafka.sh stop" --broker-start "real-kafka.sh start"
    python -m tests.chaos --broker 127.0.0.1:29092 --scenario freeze --fault-seconds 45 --broker-pid-file PIDFILE

N inputs with unique sequence numbers (key ``k<i % keys>``) go to a 6-partition topic while 2-3
worker processes sum them per key into a table and emit one output per input. Scenarios:
``kill`` (SIGKILL a random worker every few seconds, restart it on the same data directory),
``outage`` (broker stopped, restarted after ``--fault-seconds``), ``freeze`` (broker SIGSTOPped,
like a network partition, then SIGCONTed), ``churn`` (a worker joins or leaves every 5 s),
``malformed`` (10,000 records that are not JSON mixed into the input) and ``none``. At the end
every worker still running gets SIGTERM (it must exit within 30 s), and the outputs, the table's
changelog and the dead-letter topic are read back and counted against the truth. One summary
line; the exit status is non-zero unless the guarantee held: at_least_once loses nothing and no
table value is under its truth; exactly_once also duplicates nothing and every table value is
exact; in both, no worker died because of the fault and every malformed record is dead-lettered.
"""
from __future__ import annotations

import argparse
import os
import random
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from .disk import SmallDisk
from .explain import explain
from .harness import (
    STOP_BUDGET,
    Reader,
    Summary,
    Worker,
    create_topics,
    delete_run_topics,
    feed,
    group_lag,
    sigkill_rounds,
    table_errors,
    topic_ends,
    window_errors,
)

SCENARIOS = ("none", "kill", "outage", "freeze", "churn", "malformed", "diskfull")


class BrokerControl:
    """How a scenario takes the broker away: commands to stop/start it, or its pid to freeze."""

    def __init__(self, stop: str | None = None, start: str | None = None, pid_file: str | None = None,
                 pid: int | None = None) -> None:
        self.stop_cmd, self.start_cmd, self.pid_file, self._pid = stop, start, pid_file, pid

    @property
    def pid(self) -> int:
        if self._pid is not None:
            return self._pid
        if not self.pid_file:
            raise SystemExit("freeze needs --broker-pid-file (or a pid)")
        return int(Path(self.pid_file).read_text().strip())

    def _run(self, command: str | None, what: str) -> None:
        if not command:
            raise SystemExit(f"outage needs --broker-{what}")
        subprocess.run(shlex.split(command), check=True, timeout=180, stdout=subprocess.DEVNULL)

    def stop(self) -> None:
        self._run(self.stop_cmd, "stop")

    def start(self) -> None:
        self._run(self.start_cmd, "start")

    def freeze(self) -> None:
        os.kill(self.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        os.kill(self.pid, signal.SIGCONT)


def run(broker: str, driver: str, *, guarantee: str = "exactly_once", scenario: str = "kill",
        records: int = 60000, kills: int = 20, workers: int = 3, keys: int = 1000, interval: float = 3.0,
        fault_seconds: float = 45.0, churn_seconds: float = 120.0, malformed: int = 10000,
        control: BrokerControl | None = None, drain_timeout: float = 240.0, workdir: Path | None = None,
        seed: int | None = None, windows: bool = False, feed_seconds: float | None = None, fold: bool = False,
        kafka_dir: Path | None = None, log_dir: Path | None = None, keep_topics: bool = False, log=print) -> Summary:
    if scenario not in SCENARIOS:
        raise SystemExit(f"unknown scenario {scenario!r}: one of {', '.join(SCENARIOS)}")
    rng = random.Random(seed)
    unique = uuid.uuid4().hex[:8]
    names = {"app": f"chaos-{unique}", "in": f"chaos-in-{unique}", "out": f"chaos-out-{unique}"}
    if windows:
        names["final"] = f"chaos-final-{unique}"
    workdir = Path(workdir or tempfile.mkdtemp(prefix="streamkit-chaos-"))
    workdir.mkdir(parents=True, exist_ok=True)
    label = {"outage": f"outage{fault_seconds:.0f}", "freeze": f"freeze{fault_seconds:.0f}",
             "churn": f"churn{churn_seconds:.0f}"}.get(scenario, scenario)
    label += "-fold" if fold else ""  # as chaos-matrix.sh names them
    summary = Summary(driver, guarantee, label, records)
    exact = guarantee == "exactly_once"
    started = time.monotonic()
    create_topics(broker, names)
    env = {"CHAOS_FOLD": "1"} if fold else None
    pool = [Worker(i, broker, driver, guarantee, names, workdir, env=env) for i in range(workers)]
    disk = SmallDisk(pool[0].data_dir) if scenario == "diskfull" else None
    if disk is not None:
        disk.mount()  # worker 0 keeps its tables on a disk the scenario fills
    for worker in pool:
        worker.start()
    fault_phase = {"kill": max(kills * interval, 5.0), "outage": fault_seconds + 10, "freeze": fault_seconds + 10,
                   "churn": churn_seconds, "diskfull": 30.0}.get(scenario, 10.0)
    if feed_seconds is not None:  # inputs spread over this long instead (short runs in the test suite)
        fault_phase = feed_seconds
    bad_every = max(1, records // malformed) if scenario == "malformed" else 0
    stop_feed = threading.Event()
    fed: dict[str, int] = {}
    feeder = threading.Thread(target=lambda: fed.update(bad=feed(broker, names["in"], records, keys, fault_phase,
                                                                 stop_feed, bad_every)), daemon=True)
    feeder.start()
    outputs = Reader(broker, names["out"], committed=exact)
    extras: list[Worker] = []
    expected_down: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        while not outputs.records and time.monotonic() < deadline:
            outputs.poll(0.5)  # records flowing first
        if scenario == "kill":
            summary.faults += sigkill_rounds(pool, kills, rng, interval, outputs.poll,
                                             lambda: f"outputs so far {len(outputs.records)}", log)
        elif scenario in ("outage", "freeze"):
            assert control is not None, f"{scenario} needs a BrokerControl"
            log(f"  broker {'stopped' if scenario == 'outage' else 'frozen'} for {fault_seconds:.0f}s "
                f"(outputs so far {len(outputs.records)})")
            (control.stop if scenario == "outage" else control.freeze)()
            summary.faults += 1
            time.sleep(fault_seconds)  # the fault's length, not a wait for a condition
            (control.start if scenario == "outage" else control.thaw)()
            log("  broker back")
        elif scenario == "diskfull":
            assert disk is not None
            victim = pool[0]
            logged_before = victim.log_path.stat().st_size  # a reused workdir keeps older runs' lines
            log(f"  worker 0's state disk filled ({disk.fill()} bytes) at {len(outputs.records)} outputs")
            summary.faults += 1
            deadline = time.monotonic() + 120
            while victim.running and time.monotonic() < deadline:
                outputs.poll(1.0)
            with victim.log_path.open("rb") as whole:
                whole.seek(logged_before)
                halted_log = whole.read().decode(errors="replace")
            halted = (not victim.running and "writing the store" in halted_log and "No space left" in halted_log
                      and "streamkit: worker halted" in halted_log and "Traceback" not in halted_log)
            if not halted:
                summary.notes.append("worker 0 did not halt cleanly (one line, no traceback) on a full disk")
                summary.died += 1
            log(f"  worker 0 {'halted with one clear line' if halted else 'did NOT halt cleanly'}; disk cleared, restarted")
            disk.free()
            victim.start()
        elif scenario == "churn":
            deadline = time.monotonic() + churn_seconds
            index = len(pool)
            while time.monotonic() < deadline:
                outputs.poll(5.0)
                if extras and (len(extras) >= 2 or rng.random() < 0.5):
                    leaving = extras.pop(0)
                    leaving.stop()
                    expected_down.add(leaving.index)
                    if leaving.stop_seconds and leaving.stop_seconds[-1] > STOP_BUDGET:
                        summary.slow_stops += 1
                else:
                    joining = Worker(index, broker, driver, guarantee, names, workdir)
                    index += 1
                    joining.start()
                    extras.append(joining)
                summary.faults += 1
            log(f"  churn: {summary.faults} joins/leaves")
        feeder.join(1200)
        deadline = time.monotonic() + drain_timeout
        while len({m.value() for m in outputs.records}) < records and time.monotonic() < deadline:
            outputs.poll(1.0)
        ends = topic_ends(broker, names["in"])
        while time.monotonic() < deadline and group_lag(broker, names["app"], names["in"], ends) > 0:
            outputs.poll(1.0)  # every input checkpointed: the tables have caught up too
        everyone = pool + extras
        if len({m.value() for m in outputs.records}) < records:  # stalled: leave evidence in the logs
            log(f"  drain timed out at {len({m.value() for m in outputs.records})}/{records} outputs: "
                f"task dumps (SIGUSR1) in {workdir}/worker-*.log")
            for worker in everyone:
                worker.dump()
        summary.died += sum(1 for w in everyone if not w.running and w.index not in expected_down)
        for worker in everyone:
            worker.stop()
            if worker.stop_seconds and worker.stop_seconds[-1] > STOP_BUDGET:
                summary.slow_stops += 1
        outputs.drain()
    finally:
        stop_feed.set()
        for worker in pool + extras:
            worker.kill()
        outputs.close()
        if disk is not None:
            disk.unmount()
    seen = [int(m.value()) for m in outputs.records]
    unique_seen = set(seen)
    summary.outputs = len(seen)
    summary.missing = len(set(range(records)) - unique_seen)
    summary.duplicated = len(seen) - len(unique_seen)
    summary.table_under, summary.table_over = table_errors(broker, f"{names['app']}-sums-changelog", records, keys,
                                                           committed=exact)
    if windows:
        (summary.windows, summary.windows_missing, summary.windows_duplicated, summary.windows_under,
         summary.windows_over) = window_errors(broker, names["final"], records, keys, committed=exact)
    summary.malformed = fed.get("bad", 0)
    if summary.malformed:
        summary.dead_lettered = dead_letters(broker, f"{names['app']}-dlq", committed=exact, exact=exact)
    summary.seconds = time.monotonic() - started
    if not summary.ok:  # which outputs, and who wrote each copy (explain.py); kept with the logs
        summary.notes.extend(explain(outputs.records, records, topic=names["out"], kafka_dir=kafka_dir,
                                     log_dir=log_dir))
        (workdir / "explain.log").write_text("\n".join([summary.line(), *summary.notes]) + "\n")
    elif not keep_topics:  # a failed run's topics stay for explain.py and whoever looks next
        delete_run_topics(broker, unique)
    return summary


def dead_letters(broker: str, topic: str, *, committed: bool, exact: bool) -> int:
    """Malformed inputs found in the dead-letter topic (distinct ones; every copy under EOS)."""
    reader = Reader(broker, topic, committed=committed)
    try:
        reader.drain()
        bad = [m.value() for m in reader.records if (m.value() or b"").startswith(b"bad-")]
    finally:
        reader.close()
    return len(bad) if exact else len(set(bad))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker", required=True, help="host:port of the broker")
    parser.add_argument("--driver", choices=["aiokafka", "confluent"], default="confluent")
    parser.add_argument("--guarantee", choices=["at_least_once", "exactly_once"], default="exactly_once")
    parser.add_argument("--scenario", choices=SCENARIOS, default="kill")
    parser.add_argument("--records", type=int, default=60000)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--interval", type=float, default=3.0, help="mean seconds between kills")
    parser.add_argument("--fault-seconds", type=float, default=45.0, help="outage/freeze length")
    parser.add_argument("--churn-seconds", type=float, default=120.0)
    parser.add_argument("--malformed", type=int, default=10000)
    parser.add_argument("--broker-stop", help="command that stops the broker, keeping its data (outage)")
    parser.add_argument("--broker-start", help="command that starts it again (outage)")
    parser.add_argument("--broker-pid-file", help="file with the broker's pid (freeze)")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--windows", action="store_true",
                        help="also count per key per minute of event time in a tumbling window and check each "
                             "closed window's final value against the truth")
    parser.add_argument("--fold", action="store_true",
                        help="run the sum as an @app.fold (the batch loop of function agents) instead of async for")
    parser.add_argument("--workdir", type=Path, default=None, help="data dirs and worker logs (default: a temp dir)")
    parser.add_argument("--kafka-dir", type=Path, default=None,
                        help="the Kafka installation (bin/kafka-dump-log.sh): a failed run names each duplicate's batch")
    parser.add_argument("--broker-log-dir", type=Path, default=None, help="the broker's log.dirs (with --kafka-dir)")
    parser.add_argument("--keep-topics", action="store_true",
                        help="keep a passed run's topics (a failed run's are always kept)")
    args = parser.parse_args(argv)
    control = BrokerControl(args.broker_stop, args.broker_start, args.broker_pid_file)
    summary = run(args.broker, args.driver, guarantee=args.guarantee, scenario=args.scenario, records=args.records,
                  kills=args.kills, workers=args.workers, interval=args.interval, fault_seconds=args.fault_seconds,
                  churn_seconds=args.churn_seconds, malformed=args.malformed, control=control, seed=args.seed,
                  workdir=args.workdir, windows=args.windows, fold=args.fold, kafka_dir=args.kafka_dir,
                  log_dir=args.broker_log_dir, keep_topics=args.keep_topics)
    for note in summary.notes:
        print(note)
    print(summary.line())  # last: chaos-matrix.sh keeps the last line
    return 0 if summary.ok else 1


if __name__ == "__main__":
    sys.exit(main())
