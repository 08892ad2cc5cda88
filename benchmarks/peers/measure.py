"""What every peer script reports (CPU, peak RSS) and the recovery scripts' shared arguments.
Runs in the peers venv; the scripts import it from their own directory."""
import argparse
import resource


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


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
