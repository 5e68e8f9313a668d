"""``python -m reports RUN_DIR``: the same as ``python -m reports.generate RUN_DIR``."""
from reports.generate import main

raise SystemExit(main())
