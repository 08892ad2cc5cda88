"""``python -m benchmarks run --broker HOST:PORT --records N``: see benchmarks/run.py."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the scripts import each other by name

from run import main  # noqa: E402

sys.exit(main(sys.argv[1:]))
