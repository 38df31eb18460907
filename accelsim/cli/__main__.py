"""`python -m accelsim.cli ...` runs the CLI."""
import sys

from accelsim.cli import main

sys.exit(main())
