"""`python -m accelsim ...` runs the CLI."""
import sys

from accelsim.cli import main

sys.exit(main())
