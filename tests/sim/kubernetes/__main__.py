"""`python3 tests/sim/kubernetes [options]` runs the Kubernetes API server
simulator (kubesim.py); `--help` lists the options."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kubesim  # noqa: E402

sys.exit(kubesim.main())
