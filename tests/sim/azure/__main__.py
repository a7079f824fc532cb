"""`python3 tests/sim/azure [options]` runs the Azure Resource Manager +
token simulator (azuresim.py); `--help` lists the options."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import azuresim  # noqa: E402

sys.exit(azuresim.main())
