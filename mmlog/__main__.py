"""`python -m mmlog ...` is the `mmlog` command."""

from mmlog.cli import main

raise SystemExit(main())
