#!/usr/bin/env python3
"""Where a fault run's CPU goes: once a second, until it is killed, the CPU
time each process of the run used in that second, and the machine's idle
time, so that the report can say what ran while a kill's recovery starved
the machine (scripts/fault-any-one.sh).

  scripts/cpu-sampler.py RUN_DIR OUT_CSV

Each line of OUT_CSV is `ms,name,seconds`: when the second ended
(milliseconds since the epoch), a name, and the CPU seconds (user and
system) its processes used in that second. The names: each pid file's in
RUN_DIR (master, rs-2, thrift, thrift2-2, zk-1, ...), read again every
second since a process started again has a new pid; the commands
query-api, haproxy, page-load and ranker among the others; `other` for
every other process; `idle` for the machine's idle time (/proc/stat, all
cores together, so 2.0 a second is an idle two-core machine). What a
process used in the second it ended is not seen: a fault run's processes
live for minutes, but a build's short ones would go missing.
"""

import glob
import os
import sys
import time

WATCHED_COMMANDS = ("query-api", "haproxy", "page-load", "ranker")
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


def cpu_ticks_by_pid():
    """Every process's command, start time and user and system ticks so far."""
    ticks = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as text:
                stat = text.read()
        except OSError:
            continue
        # The command is in parentheses and may hold spaces; the fields after it are plain.
        command = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        ticks[int(entry)] = (command, int(fields[19]), int(fields[11]) + int(fields[12]))
    return ticks


def idle_ticks():
    with open("/proc/stat") as text:
        cpu = text.readline().split()
    # idle and iowait: time no process wanted a core.
    return int(cpu[4]) + int(cpu[5])


def main():
    run_dir, out_csv = sys.argv[1], sys.argv[2]
    previous, previous_idle = cpu_ticks_by_pid(), idle_ticks()
    with open(out_csv, "a", buffering=1) as out:
        while True:
            time.sleep(1)
            now_ms = int(time.time() * 1000)
            named = names_by_pid(run_dir)
            current, current_idle = cpu_ticks_by_pid(), idle_ticks()
            used = {}
            for pid, (command, started, ticks) in current.items():
                before = previous.get(pid)
                # A process born in this second counts from zero, a pid reused
                # by one too (its start time differs; its command may not).
                spent = ticks - before[2] if before and before[1] == started else ticks
                if spent <= 0:
                    continue
                name = named.get(pid) or (command if command in WATCHED_COMMANDS else "other")
                used[name] = used.get(name, 0) + spent
            used["idle"] = current_idle - previous_idle
            out.write("".join(f"{now_ms},{name},{ticks / TICKS:.2f}\n" for name, ticks in sorted(used.items())))
            previous, previous_idle = current, current_idle


if __name__ == "__main__":
    main()
