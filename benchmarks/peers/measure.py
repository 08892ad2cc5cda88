"""What every peer script reports (CPU, peak RSS) and the recovery scripts' shared arguments.
Runs in the peers venv; the scripts import it from their own directory."""
import argparse
import resource


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def peak_rss_mb() -> float:
    """This process's own peak RSS (``VmHWM``). Not ``ru_maxrss``: a child started by vfork (as
    Python's subprocess starts it) begins with its parent's peak there, so every scenario
    reported at least the orchestrator's (both drivers' 10M-key runs showed the same figure)."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024


def recovery_args() -> argparse.Namespace:
    """``--broker --keys --phase fill|restore --group [--state-dir]`` (unknown ones ignored:
    faust's command line comes after)."""
    p = argparse.ArgumentParser()
    p.add_argument("--broker", required=True)
    p.add_argument("--keys", type=int, required=True)
    p.add_argument("--phase", choices=("fill", "restore"), required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--state-dir")
    return p.parse_known_args()[0]
