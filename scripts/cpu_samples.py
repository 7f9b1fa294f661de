"""What scripts/cpu-sampler.py wrote, read back: the cores each process used
on average over a window of a run. Imported by the reports of
scripts/fault-any-one.sh and bench/fairness.sh (run from the repository's
root, with `scripts` on the module path)."""


def read(path):
    """The samples of the CSV at `path`, as (ms, name, seconds); none when it
    does not exist. A line the sampler was stopped in the middle of is left
    out."""
    samples = []
    try:
        with open(path) as text:
            for line in text:
                try:
                    ms, name, seconds = line.strip().split(",")
                    samples.append((int(ms), name, float(seconds)))
                except ValueError:
                    continue
    except OSError:
        pass
    return samples


def cores(samples, start_ms, end_ms, kind_of=lambda name: name):
    """The cores each kind of process (`kind_of` its name: by default the
    name itself) used on average in the samples ending after `start_ms` and
    by `end_ms`, `idle` and `jit` among them; empty when none ended then."""
    inside = [(kind_of(name), seconds) for ms, name, seconds in samples if start_ms < ms <= end_ms]
    span = sum(seconds for kind, seconds in inside if kind == "elapsed")
    used = {}
    for kind, seconds in inside:
        if kind != "elapsed":
            used[kind] = used.get(kind, 0.0) + seconds
    return {kind: total / span for kind, total in used.items()} if span else {}
