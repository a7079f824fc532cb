"""`python3 tests/sim/gce [options]` runs the Compute Engine + OAuth2
simulator (gcesim.py); `--help` lists the options."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gcesim  # noqa: E402

sys.exit(gcesim.main())
