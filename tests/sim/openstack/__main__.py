"""`python3 tests/sim/openstack [options]` runs the OpenStack simulator
(ossim.py); `python3 tests/sim/openstack --help` lists the options."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ossim  # noqa: E402

sys.exit(ossim.main())
