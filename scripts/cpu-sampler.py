#!/usr/bin/env python3
"""Where a fault run's CPU goes: once a second, until it is killed, the CPU
time each process of the run used in that second, and the machine's idle
time, so that the report can say what ran while a kill's recovery starved
the machine (scripts/fault-any-one.sh), or a flood shared it with the
readers (bench/fairness.sh).

  scripts/cpu-sampler.py RUN_DIR OUT_CSV

Each line of OUT_CSV is `ms,name,seconds`: when the sample ended
(milliseconds since the epoch), a name, and the CPU seconds (user and
system) its processes used in that sample, about a second: the name
`elapsed` gives its length in seconds. The names: each pid file's in
RUN_DIR (master, rs-2, thrift, thrift2-2, zk-1, ...), read again every
second since a process started again has a new pid; the commands
query-api, haproxy, page-load, ranker, soak and anchor among the others;
`other` for every other process; `idle` for the machine's idle time
(/proc/stat, all cores together: an idle two-core machine's is twice
`elapsed`); `jit` for the JIT compiler threads of all the run's JVMs
together, a part of what their names carry (a JVM's compilers catch up on
the code a failure or a ranking run makes hot, and on a small machine take
cores from its reads). What a process used in the second it ended is not
seen: a fault run's processes live for minutes, but a build's short ones
would go missing.
"""

import glob
import os
import sys
import time

WATCHED_COMMANDS = ("query-api", "haproxy", "page-load", "ranker", "soak", "anchor")
TICKS = os.sysconf("SC_CLK_TCK")


def names_by_pid(run_dir):
    """The run's processes by pid, from its pid files; a pid file being
    rewritten reads as nothing and is named again a second later."""
    named = {}
    for pid_file in glob.glob(os.path.join(run_dir, "*.pid")):
        try:
            with open(pid_file) as text:
                named[int(text.read().strip())] = os.path.basename(pid_file)[: -len(".pid")]
        except (OSError, ValueError):
            continue
    return named


def read_stat(path):
    """A process's or thread's command, start time and user and system ticks
    so far, from its stat file; None when it has gone."""
    try:
        with open(path) as text:
            stat = text.read()
    except OSError:
        return None
    # The command is in parentheses and may hold spaces; the fields after it are plain.
    command = stat[stat.index("(") + 1 : stat.rindex(")")]
    fields = stat[stat.rindex(")") + 2 :].split()
    return command, int(fields[19]), int(fields[11]) + int(fields[12])


def cpu_ticks_by_pid():
    """Every process's command, start time and ticks so far."""
    ticks = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := read_stat(f"/proc/{entry}/stat")) is not None:
            ticks[int(entry)] = stat
    return ticks


class CompilerThreads:
    """The JIT compiler threads (HotSpot's C1 and C2 CompilerThreadN) of the
    run's JVMs. A JVM's threads are looked through when it is first seen and
    every RESCAN_SECS after, not every second: a region server has hundreds
    of threads, and reading each one's stat every second would cost the
    starved machine a share of a core."""

    RESCAN_SECS = 30

    def __init__(self):
        self.paths_by_pid = {}  # pid -> (when looked through, its compiler threads' stat files)

    def ticks(self, pids, now):
        """The compiler threads of these processes, by stat file: command,
        start time and ticks so far."""
        self.paths_by_pid = {pid: seen for pid, seen in self.paths_by_pid.items() if pid in pids}
        ticks = {}
        for pid in pids:
            looked, paths = self.paths_by_pid.get(pid, (None, []))
            # A JVM just launched has none yet: looked for again each second.
            if not paths or now - looked >= self.RESCAN_SECS:
                paths = [path for path in glob.glob(f"/proc/{pid}/task/*/stat") if is_compiler(read_stat(path))]
                self.paths_by_pid[pid] = (now, paths)
            for path in paths:
                stat = read_stat(path)
                if is_compiler(stat):
                    ticks[path] = stat
        return ticks


def is_compiler(stat):
    # "C2 CompilerThread0", as far as the kernel keeps of a thread's name.
    return stat is not None and stat[0].startswith(("C1 Compi", "C2 Compi"))


def spent_since(previous, current):
    """Ticks each of `current`'s processes or threads used since `previous`:
    one born since counts from zero, an id reused by one too (its start
    time differs; its command may not)."""
    for key, (command, started, ticks) in current.items():
        before = previous.get(key)
        yield key, command, ticks - before[2] if before and before[1] == started else ticks


def idle_ticks():
    with open("/proc/stat") as text:
        cpu = text.readline().split()
    # idle and iowait: time no process wanted a core.
    return int(cpu[4]) + int(cpu[5])


def main():
    run_dir, out_csv = sys.argv[1], sys.argv[2]
    previous, previous_idle = cpu_ticks_by_pid(), idle_ticks()
    compiler_threads = CompilerThreads()
    previous_at = time.monotonic()
    previous_compilers = compiler_threads.ticks(names_by_pid(run_dir), previous_at)
    with open(out_csv, "a", buffering=1) as out:
        while True:
            time.sleep(1)
            named = names_by_pid(run_dir)
            current, current_idle = cpu_ticks_by_pid(), idle_ticks()
            compilers = compiler_threads.ticks(named, time.monotonic())
            # The reads themselves take time, more on a starved machine: the
            # sample covers what passed between two rounds of them.
            now_at, now_ms = time.monotonic(), int(time.time() * 1000)
            used = {}
            for pid, command, spent in spent_since(previous, current):
                if spent > 0:
                    name = named.get(pid) or (command if command in WATCHED_COMMANDS else "other")
                    used[name] = used.get(name, 0) + spent
            used["idle"] = current_idle - previous_idle
            used["jit"] = sum(max(spent, 0) for _, _, spent in spent_since(previous_compilers, compilers))
            lines = [f"{now_ms},{name},{ticks / TICKS:.2f}\n" for name, ticks in sorted(used.items())]
            lines.append(f"{now_ms},elapsed,{now_at - previous_at:.3f}\n")
            out.write("".join(lines))
            previous, previous_idle, previous_compilers, previous_at = current, current_idle, compilers, now_at


if __name__ == "__main__":
    main()
