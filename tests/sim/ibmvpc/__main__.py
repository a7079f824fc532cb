"""`python3 tests/sim/ibmvpc [options]` runs the IBM Cloud VPC simulator
(ibmvpcsim.py); `--help` lists the options."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ibmvpcsim  # noqa: E402

sys.exit(ibmvpcsim.main())
