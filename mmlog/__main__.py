"""`python -m mmlog ...` is the `mmlog` command."""

from mmlog.cli.main import main

raise SystemExit(main())
