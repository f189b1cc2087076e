"""`python -m tools.bench`: see tools/bench/run.py."""

from tools.bench.run import main

raise SystemExit(main())
